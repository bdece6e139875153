"""SCH-2, SCH-3, SCH-4: fallback to a fabric device, and binding gated on every binding condition.

The suite's driver publishes a fabric pool with two binding conditions that reaches two nodes (bindsToNode), and,
where the cluster has a second node, a node-local device on that other node. A pod pinned to the first node can only
get the fabric device. The suite, playing the controller, then sets ONE of the two conditions True and watches two
PreBind polls (the pod must stay unbound and nominated to its node), then the other one (the pod must bind, on the
allocated node). Bindings are ordered against the condition writes by etcd revision, not by wall-clock time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.versions import parse_version
from conformance.observe.views import SCHEDULE_S, Allocation, Binding
from conformance.suite.cluster.owned import PREBIND_POLL_S, hold, nominated, start, wait_pending
from conformance.suite.scenario import ClusterContext, result_fixture, scenario


@dataclass
class Gate:
    node: str
    reach: list[str]  # the nodes the fabric pool selects
    published: dict[str, dict[str, Any]]  # device name -> as published
    allocation: Allocation | None = None
    pending: dict[str, int] = field(default_factory=dict)
    early: Binding | None = None  # a binding seen while one condition was still not True
    first_write: int = 0  # revision of the write that set the first condition
    last_write: int = 0  # revision of the write that set the last one
    binding: Binding | None = None
    nominated: set[str] = field(default_factory=set)  # nominatedNodeName values before the binding
    stopped: str = ""  # a wait that ran out: the observation ends there


@scenario(
    "binding-gate",
    "a pod on a node without local devices gets a fabric device; it binds only once both binding conditions are True",
    ("SCH-2", "SCH-3", "SCH-4"),
    implementation=False,
)
def binding_gate(ctx: ClusterContext) -> Gate:
    driver, nodes = start(ctx)
    node, reach = nodes[0], nodes[:2]
    if len(nodes) > 1:
        driver.local_pool(nodes[1])  # matches the claim, but not on the pod's node: the fabric is the fallback
    conditions = (driver.attached, driver.ready)
    names = driver.fabric_pool(reach, conditions=conditions)
    gate = Gate(node, reach, {d["name"]: d for d in driver.pools["a-fabric"]["spec"]["devices"] if d["name"] in names})
    driver.pod("app", driver.claim_template(), node)
    ns = driver.namespace
    with ctx.history(ns) as history:
        try:
            gate.allocation = history.wait(
                lambda h: next(iter(h.allocations()), None), timeout=SCHEDULE_S, expected="the claim to be allocated"
            )
            gate.pending = wait_pending(ctx.history(ns), ["app"])
            claim = history.events("claim")[-1].name
            gate.first_write = driver.set_conditions(claim, gate.allocation.devices, [driver.attached])
            gate.early = hold(history)
            gate.last_write = driver.set_conditions(claim, gate.allocation.devices, [driver.ready])
            written = time.time()
            gate.binding = history.wait(
                lambda h: h.binding(), timeout=PREBIND_POLL_S + SCHEDULE_S, expected="the pod to be bound"
            )
            ctx.measure("conditions_to_bind_seconds", round(gate.binding.at - written, 3))
        except AssertionError as exc:
            gate.stopped = str(exc)
        gate.nominated = nominated(history, "app", gate.binding.revision if gate.binding else None)
    return gate


gate = result_fixture("gate", "binding-gate")


def _allocation(gate: Gate) -> Allocation:
    assert gate.allocation, f"the claim was never allocated: {gate.stopped}"
    return gate.allocation


@pytest.mark.requirement("SCH-2")
def test_fallback_allocation_copies_conditions_and_pins_one_node(gate: Gate) -> None:
    allocation = _allocation(gate)
    assert len(allocation.results) == 1, allocation.results
    result = allocation.results[0]
    source = gate.published.get(result["device"])
    assert source, f"allocated {result['pool']}/{result['device']}, not the fabric device {sorted(gate.published)}"
    for key in ("bindingConditions", "bindingFailureConditions"):
        assert result.get(key) == source[key], f"result {key} {result.get(key)}, the slice publishes {source[key]}"
    assert allocation.allocation.get("allocationTimestamp"), f"allocationTimestamp not set: {allocation.allocation}"
    terms = allocation.allocation.get("nodeSelector", {}).get("nodeSelectorTerms")
    expected = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [gate.node]}]}]
    assert terms == expected, f"bindsToNode: the allocation must pin exactly {gate.node} (slice reaches {gate.reach})"


@pytest.mark.requirement("SCH-3")
def test_no_binding_before_all_conditions_are_true(gate: Gate, cluster: Cluster) -> None:
    _allocation(gate)
    assert gate.pending.get("app"), f"no BindingConditionsPending event for the pod: {gate.stopped}"
    assert gate.early is None, (
        f"the pod was bound (revision {gate.early.revision}) while only one of two binding conditions was True "
        f"(set at revision {gate.first_write})"
    )
    assert gate.binding, f"the pod was not bound after both conditions were True: {gate.stopped}"
    assert gate.binding.revision > gate.last_write, (
        f"bound at revision {gate.binding.revision}, before the last condition was set at {gate.last_write}"
    )
    if parse_version(cluster.info.version).release.nominates_while_waiting:  # NominatedNodeNameForExpectation
        assert gate.nominated == {gate.node}, (
            f"while waiting in PreBind nominatedNodeName showed {gate.nominated or 'nothing'}, expected {gate.node}"
        )


@pytest.mark.requirement("SCH-4")
def test_binds_to_the_allocated_node(gate: Gate) -> None:
    _allocation(gate)
    assert gate.binding, f"the pod was not bound once all conditions were True: {gate.stopped}"
    assert gate.binding.node == gate.node == gate.allocation.node, (
        f"bound to {gate.binding.node}; the allocation pins {gate.allocation.node}"
    )
