"""Unit tests of the device pool: grouping published copies by identity, leases, the CEL selector.

Slices are plain dicts as the apiserver returns them; no cluster is involved.
"""

from __future__ import annotations

import json
import threading

import pytest

from conformance.cluster.providers.base import NodeSpec
from conformance.observe.devices import FAILED, MOVED, RELEASED, DevicePool, incomplete_pools, read_devices

DRIVER = "gpu.example.com"
NODES = [NodeSpec("node-0", {"fabric": "a"}), NodeSpec("node-1", {"fabric": "b"})]


def _dev(name: str, uuid: str, conditions: bool = False) -> dict:
    d = {"name": name, "attributes": {"uuid": {"string": uuid}}}
    if conditions:
        d |= {"bindsToNode": True, "bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/failed"]}
    return d


def _slice(pool: str, devices: list[dict], node: str | None = None, fabric: str | None = None) -> dict:
    spec = {"driver": DRIVER, "pool": {"name": pool}, "devices": devices}
    if node:
        spec["nodeName"] = node
    else:
        term = {"matchExpressions": [{"key": "fabric", "operator": "In", "values": [fabric]}]}
        spec["nodeSelector"] = {"nodeSelectorTerms": [term]}
    return {"spec": spec}


SLICES = [
    _slice("node-0", [_dev("local-0", "L0"), _dev("hot-f0", "F0")], node="node-0"),  # F0 also hot-plugged here
    _slice("fabric-a", [_dev("f0", "F0", True), _dev("f1", "F1", True)], fabric="a"),
    _slice("fabric-b", [_dev("f2", "F2", True)], fabric="b"),
]


def test_copies_are_grouped_by_identity_and_kind_follows_the_fabric_copy() -> None:
    devices = read_devices(SLICES, "uuid", NODES)
    assert devices["L0"].kind == "local" and devices["L0"].nodes == {"node-0"}
    assert devices["F0"].kind == "fabric" and devices["F0"].nodes == {"node-0"}
    assert devices["F0"].copies == (("fabric-a", "f0"), ("node-0", "hot-f0"))
    assert devices["F2"].nodes == {"node-1"}


def test_a_qualified_identity_attribute_is_read_and_selected() -> None:
    slices = [_slice("fabric-a", [{"name": "f0", "attributes": {"vendor.io/serial": {"string": "S0"}}}], fabric="a")]
    slices[0]["spec"]["devices"][0] |= {"bindingConditions": ["x/r"], "bindingFailureConditions": ["x/f"]}
    pool = DevicePool(DRIVER, "vendor.io/serial", read_devices(slices, "vendor.io/serial", NODES))
    assert list(pool.devices) == ["S0"]
    assert 'device.attributes["vendor.io"].serial in ["S0"]' in pool.selector(["S0"])


def test_lease_hands_out_distinct_devices_and_waits_for_a_release() -> None:
    pool = DevicePool(DRIVER, "uuid", read_devices(SLICES, "uuid", NODES))
    first = pool.lease("a", 2, "fabric")
    assert len(set(first.identities)) == 2
    got: list[list[str]] = []
    waiter = threading.Thread(target=lambda: got.append(pool.lease("b", 2, "fabric", timeout=10).identities))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive(), "a second lease of 2 of 3 fabric devices must wait while 2 are held"
    pool.release(first)
    waiter.join(10)
    assert got and len(got[0]) == 2


def test_leases_prefer_rested_devices_unless_asked_for_a_devices_past_on_purpose() -> None:
    pool = DevicePool(DRIVER, "uuid", read_devices(SLICES, "uuid", NODES))
    pool.release(pool.lease("a", 1, "fabric", node="node-0"))  # F0: used, released
    rested = pool.lease("b", 1, "fabric", node="node-0", timeout=1)
    assert rested.identities == ["F1"], "the rested one first"
    pool.release(rested)
    pool.release(pool.lease("c", 1, "fabric", node="node-0", timeout=1))  # F0 again (F1 released longer ago)
    pool.note("F2", MOVED)
    pool.note("F1", FAILED)
    reused = pool.lease("d", 3, "fabric", prefer=(FAILED, MOVED, RELEASED), timeout=1)
    assert reused.identities == ["F1", "F2", "F0"], reused
    assert reused.past == {"F1": FAILED, "F2": MOVED, "F0": RELEASED}, "each for what it went through"
    pool.release(reused)
    again = pool.lease("e", 1, "fabric", prefer=(RELEASED,), timeout=1)
    assert again.past == {again.identities[0]: RELEASED}, "the device released last, on purpose"


def test_lease_of_more_than_published_is_a_skip_and_a_held_pool_times_out() -> None:
    pool = DevicePool(DRIVER, "uuid", read_devices(SLICES, "uuid", NODES))
    with pytest.raises(pytest.skip.Exception, match="publishes 2"):
        pool.lease("a", 3, "fabric", node="node-0")
    pool.lease("a", 1, "fabric", node="node-1")
    with pytest.raises(AssertionError, match=r"held by \['a'\]"):
        pool.lease("b", 1, "fabric", node="node-1", timeout=0.2)


def test_selector_matches_only_the_driver_and_the_identities() -> None:
    pool = DevicePool(DRIVER, "uuid", {})
    cel = pool.selector(["F1", "F0"])
    assert cel == (
        'device.driver == "gpu.example.com" && "uuid" in device.attributes["gpu.example.com"] '
        '&& device.attributes["gpu.example.com"].uuid in ["F0", "F1"]'
    )


def test_a_large_lease_is_selected_by_excluding_the_other_identities() -> None:
    many = [_dev(f"f{i}", f"{i:036d}", True) for i in range(400)]
    pool = DevicePool(DRIVER, "uuid", read_devices([_slice("fabric-a", many, fabric="a")], "uuid", NODES))
    chosen = [f"{i:036d}" for i in range(395)]
    cel = pool.selector(chosen)
    assert len(cel) <= 10240
    assert cel.endswith(f'!(device.attributes["gpu.example.com"].uuid in {json.dumps(sorted(pool.devices)[395:])})')


def test_a_pool_is_incomplete_until_its_newest_generation_has_all_its_slices() -> None:
    def part(name: str, generation: int, count: int) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {"pool": {"name": "p", "generation": generation, "resourceSliceCount": count}},
        }

    assert incomplete_pools([part("a", 1, 2)]) == ["p"]
    assert incomplete_pools([part("a", 1, 2), part("b", 1, 2)]) == []
    assert incomplete_pools([part("a", 1, 2), part("b", 1, 2), part("c", 2, 2)]) == ["p"], "a rewrite in progress"
