"""Count-based leases (conformance/observe/devices.py `DevicePool.lease_counted`): parts of one scenario that each
need a node alone (IMP-8 staging its steps side by side, `Context.lease(part=...)`) get distinct nodes, and capacity
is counted per part. No cluster: the pool is built from its own dataclasses."""

from __future__ import annotations

import pytest

from conformance.observe.devices import CountedPool, DevicePool

NODES = ["node-2", "node-3", "node-4", "node-5"]


def _pool(entries: int) -> DevicePool:
    counted = CountedPool("fabric-0", "gpu-a", entries, frozenset(NODES))
    return DevicePool("gpu.example.com", "uuid", {}, counted={("fabric-0", "gpu-a"): counted})


def test_parts_of_one_scenario_hold_distinct_nodes_alone() -> None:
    pool = _pool(8)
    leases = [pool.lease_counted(f"restart/{p}", 1, NODES, exclusive=True) for p in ("a", "b", "c", "d")]
    assert sorted(lease.node for lease in leases) == NODES
    with pytest.raises(AssertionError, match="not available within"):
        pool.lease_counted("restart/e", 1, NODES, exclusive=True, timeout=0.1)
    pool.release(leases[0])
    assert pool.lease_counted("restart/e", 1, NODES, exclusive=True, timeout=0.1).node == leases[0].node


def test_capacity_is_counted_per_part() -> None:
    pool = _pool(2)
    pool.lease_counted("restart/a", 1, NODES, exclusive=True)
    pool.lease_counted("restart/b", 1, NODES, exclusive=True)
    with pytest.raises(AssertionError, match="not available within"):
        pool.lease_counted("restart/c", 1, NODES, exclusive=True, timeout=0.1)
