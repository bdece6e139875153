"""Reach is owed, never a skip (issue 36 item 2): Context.reach_owed and the leases' reach (Context._owed_reach) wait up
to the promise, then FAIL naming the pools and the labels nodes lack while the implementation still owes reach, and
skip only when every pool reaches its nodes and the fabric's shape cannot give what the scenario needs.

The Context is built with stand-ins said so here: a watcher that hands out synthetic slices and nodes, no cluster;
the promise has passed (the owed path does not wait)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster.providers.base import ClusterInfo, NodeSpec
from conformance.implementation.profile import API_VERSION, KIND, Profile
from conformance.observe.devices import DevicePool
from conformance.observe.publishing import PublishLog
from conformance.observe.recorder import Recorder
from conformance.suite.implementation.context import Context, ImplementationOwes
from conformance.suite.record import Scenario

DRIVER = "gpu.example.com"
KEY = "fabric.example.com/id"
PROFILE = Profile.model_validate(
    {"apiVersion": API_VERSION, "kind": KIND, "name": "p", "version": "1", "driver": DRIVER}
    | {"identityAttribute": "uuid"}
)


def _fabric(pool: str, uuids: list[str], reach: dict[str, Any]) -> dict[str, Any]:
    devices = [
        {
            "name": f"{pool}-{u}",
            "attributes": {"uuid": {"string": u}},
            "bindsToNode": True,
            "bindingConditions": ["x/ready"],
            "bindingFailureConditions": ["x/failed"],
        }
        for u in uuids
    ]
    spec = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "devices": devices}
    return {"metadata": {"name": pool, "resourceVersion": "1"}, "spec": {**spec, **reach}}


def _selecting(value: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": KEY, "operator": "In", "values": [value]}]}
    return {"nodeSelector": {"nodeSelectorTerms": [term]}}


@dataclass
class _Watcher:
    slices: list[dict[str, Any]]
    nodes: list[NodeSpec] = field(default_factory=list)

    def live_nodes(self) -> list[NodeSpec]:
        return self.nodes

    def driver_slices(self) -> list[dict[str, Any]]:
        return self.slices


class _Cluster:
    info = ClusterInfo("c", "local", Path("/dev/null"), "v1.37.2", {}, 20, True, [])


def _context(slices: list[dict[str, Any]], nodes: list[NodeSpec]) -> Context:
    watcher = _Watcher(slices, nodes)
    pool = DevicePool(DRIVER, "uuid", {})
    ctx = Context(
        scenario=Scenario("s", "d", ("IMP-2",), lambda ctx: None, "m"),
        cluster=_Cluster(),  # type: ignore[arg-type]
        implementation=None,  # type: ignore[arg-type]
        profile=PROFILE,
        pool=pool,
        objects=None,  # type: ignore[arg-type]
        say=lambda _m: None,
        record=Recorder(None, "r"),
        invariants=watcher,  # type: ignore[arg-type]
        publish=PublishLog(ready_at=time.time() - 100, promise_s=60),  # the promise has passed
    )
    ctx.refresh()
    return ctx


NODES = [NodeSpec("node-0", {KEY: "f0"}), NodeSpec("node-1", {KEY: "f0"}), NodeSpec("node-2", {})]


def test_a_lease_whose_devices_reach_no_node_fails_naming_the_pool_and_the_label() -> None:
    ctx = _context([_fabric("fabric-0", ["a", "b"], _selecting("missing"))], NODES)
    with pytest.raises(ImplementationOwes) as caught:
        ctx.lease(1, "fabric", "node-0")
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"the implementation did not publish 1 fabric devices of {DRIVER} reaching node-0")
    assert f"fabric pool fabric-0 (nodeSelector [{KEY}=missing]) matches none" in first, first


def test_a_claim_shape_the_fabric_cannot_give_is_a_skip_once_every_pool_reaches_its_nodes() -> None:
    from conformance.suite.implementation.shape import claim_size

    one_each = [_fabric("fabric-0", ["a"], _selecting("f0")), _fabric("fabric-1", ["b"], _selecting("f1"))]
    ctx = _context(one_each, [*NODES, NodeSpec("node-3", {KEY: "f1"})])
    with pytest.raises(pytest.skip.Exception, match=r"not in this fabric's shape.*at most 1 fabric devices reach one"):
        claim_size(ctx)
    unreached = _context([_fabric("fabric-0", ["a", "b"], _selecting("missing"))], NODES)
    with pytest.raises(ImplementationOwes, match=r"reached by 2 fabric devices within promises\.publishSeconds=60"):
        claim_size(unreached)


def test_reach_that_is_there_is_found_at_once() -> None:
    ctx = _context([_fabric("fabric-0", ["a", "b"], _selecting("f0"))], NODES)
    assert ctx.lease(2, "fabric", "node-0").identities == ["a", "b"]
    ctx.release()
