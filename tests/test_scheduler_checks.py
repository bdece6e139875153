"""The SCH-* checks fail on what a broken scheduler would show (tests of the tests).

No scheduler here: each check is fed a made-up observation (a fake, said so here) of a correct run, which must pass,
and variants a broken kube-scheduler would produce, which must fail. The real observations come from the cluster
scenarios in conformance/suite/cluster/.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.observe.views import Allocation, Binding
from conformance.suite.cluster import (
    test_binding_gate as gate_mod,
)
from conformance.suite.cluster import (
    test_binding_timeout as timeout_mod,
)
from conformance.suite.cluster import (
    test_failure_reschedule as failure_mod,
)
from conformance.suite.cluster import (
    test_multi_device_claim as multi_mod,
)
from conformance.suite.cluster import (
    test_node_local_preference as pref_mod,
)
from conformance.suite.cluster import (
    test_shared_claim as shared_mod,
)

D = "sch-x.conformance.example.com"
PINNED_A = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]
FABRIC = {"bindingConditions": [f"{D}/attached", f"{D}/ready"], "bindingFailureConditions": [f"{D}/failed"]}


def _result(device: str, **fields: Any) -> dict[str, Any]:
    return {"driver": D, "pool": "a-fabric", "device": device, "request": "dev", **fields}


def _allocation(revision: int, *devices: str, at: float = 0.0, node: str = "a") -> Allocation:
    selector = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    results = [_result(d, **FABRIC) for d in devices]
    body = {
        "devices": {"results": results},
        "nodeSelector": {"nodeSelectorTerms": selector},
        "allocationTimestamp": "t",
    }
    return Allocation(revision, at, body)


def _cluster(version: str = "1.37.2") -> Any:
    return SimpleNamespace(info=SimpleNamespace(version=version))


def _good_gate() -> gate_mod.Gate:
    published = {"a-fabric-0": {"name": "a-fabric-0", **FABRIC}}
    return gate_mod.Gate(
        node="a",
        reach=["a", "b"],
        published=published,
        allocation=_allocation(10, "a-fabric-0"),
        pending={"app": 1},
        first_write=12,
        last_write=20,
        binding=Binding(25, 0.0, "a", "ready"),
        nominated={"a"},
    )


def _checks_gate(gate: gate_mod.Gate) -> None:
    gate_mod.test_fallback_allocation_copies_conditions_and_pins_one_node(gate)
    gate_mod.test_no_binding_before_all_conditions_are_true(gate, _cluster())
    gate_mod.test_binds_to_the_allocated_node(gate)


def test_a_correct_gate_passes() -> None:
    _checks_gate(_good_gate())


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ({"early": Binding(15, 0.0, "a", "pending")}, "only one of two binding conditions"),
        ({"binding": Binding(19, 0.0, "a", "pending")}, "before the last condition"),
        ({"pending": {}}, "no BindingConditionsPending"),
        ({"nominated": set()}, "nominatedNodeName showed nothing"),
        ({"binding": Binding(25, 0.0, "b", "ready")}, "bound to b"),
        ({"binding": None}, "not bound"),
    ],
)
def test_a_scheduler_that_binds_early_or_elsewhere_fails_sch_3_4(broken: dict[str, Any], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        _checks_gate(dataclasses.replace(_good_gate(), **broken))


def test_sch_2_fails_without_copied_conditions_or_with_a_wide_selector() -> None:
    gate = _good_gate()
    gate.allocation.allocation["devices"]["results"][0]["bindingConditions"] = [f"{D}/attached"]
    with pytest.raises(AssertionError, match="result bindingConditions"):
        gate_mod.test_fallback_allocation_copies_conditions_and_pins_one_node(gate)
    gate = _good_gate()
    gate.allocation.allocation["nodeSelector"]["nodeSelectorTerms"] = [{"matchExpressions": []}]
    with pytest.raises(AssertionError, match="pin exactly a"):
        gate_mod.test_fallback_allocation_copies_conditions_and_pins_one_node(gate)


def test_sch_1_fails_when_the_fabric_device_wins() -> None:
    good = pref_mod.Preference("a", ["z-local-0"], [{"pool": "z-local", "device": "z-local-0"}], "a", 0)
    pref_mod.test_node_local_device_is_preferred(good)
    fabric = [{"pool": "a-fabric", "device": "a-fabric-0", **FABRIC}]
    with pytest.raises(AssertionError, match="although the node-local device"):
        pref_mod.test_node_local_device_is_preferred(dataclasses.replace(good, results=fabric))
    with pytest.raises(AssertionError, match="must not wait in PreBind"):
        pref_mod.test_node_local_device_is_preferred(dataclasses.replace(good, pending_events=1))


def _failure_run(second: str = "a-fabric-1", bound_at: int = 40) -> failure_mod.Failure:
    first = _allocation(10, "a-fabric-0")
    first.failures = [{"type": f"{D}/failed", "status": "True"}]
    first.cleared_revision = 22
    return failure_mod.Failure(
        "a",
        [first, _allocation(25, second)],
        ("a-fabric", "a-fabric-0"),
        failure_write=20,
        ready_write=30,
        binding=Binding(bound_at, 0.0, "a", "ready"),
    )


def test_sch_5_fails_on_reallocation_to_the_failed_device_or_an_early_binding() -> None:
    failure_mod.test_failure_condition_deallocates_and_reschedules_elsewhere(_failure_run())
    with pytest.raises(AssertionError, match="onto the failed"):
        failure_mod.test_failure_condition_deallocates_and_reschedules_elsewhere(_failure_run(second="a-fabric-0"))
    with pytest.raises(AssertionError, match="before the new device"):
        failure_mod.test_failure_condition_deallocates_and_reschedules_elsewhere(_failure_run(bound_at=28))
    never_cleared = _failure_run()
    never_cleared.allocations = never_cleared.allocations[:1]
    never_cleared.allocations[0].cleared_revision = None
    with pytest.raises(AssertionError, match="never cleared"):
        failure_mod.test_failure_condition_deallocates_and_reschedules_elsewhere(never_cleared)


def _timeout_run(cleared_after: float = 20.5, events: bool = True) -> timeout_mod.Timeout:
    first = _allocation(10, "a-fabric-0", at=100.0)
    first.cleared_revision, first.cleared_at = 30, 100.0 + cleared_after
    run = timeout_mod.Timeout("a", 20.0, [first, _allocation(35, "a-fabric-0", at=125.0)], ready_write=40)
    run.binding = Binding(45, 131.0, "a", "ready")
    if events:
        run.events = [{"type": "Warning", "reason": "FailedScheduling", "message": "device binding timeout"}]
    return run


def test_sch_6_fails_on_an_early_clear_or_no_timeout_message() -> None:
    timeout_mod.test_timeout_deallocates_and_the_pod_recovers(_timeout_run())
    with pytest.raises(AssertionError, match=r"declared 20s, the allocation was cleared 6\.0s after"):
        timeout_mod.test_timeout_deallocates_and_the_pod_recovers(_timeout_run(cleared_after=6.0))
    with pytest.raises(AssertionError, match=r"declared 20s, the allocation was cleared 40\.0s after"):
        timeout_mod.test_timeout_deallocates_and_the_pod_recovers(_timeout_run(cleared_after=40.0))
    with pytest.raises(AssertionError, match="no 'binding timeout'"):
        timeout_mod.test_timeout_deallocates_and_the_pod_recovers(_timeout_run(events=False))


def _shared_run() -> shared_mod.Shared:
    pods = ["app-0", "app-1", "app-2"]
    claim = {"status": {"allocation": {"x": 1}, "reservedFor": [{"name": p} for p in pods]}}
    return shared_mod.Shared(
        "a",
        pods,
        pending=dict.fromkeys(pods, 1),
        ready_write=20,
        bindings={p: Binding(21 + i, 0.0, "a", "ready") for i, p in enumerate(pods)},
        claim=claim,
    )


def test_sch_7_fails_when_a_pod_does_not_wait_or_binds_early() -> None:
    shared_mod.test_shared_claim_every_pod_waits_then_binds(_shared_run())
    run = _shared_run()
    run.pending.pop("app-2")
    with pytest.raises(AssertionError, match="BindingConditionsPending"):
        shared_mod.test_shared_claim_every_pod_waits_then_binds(run)
    run = _shared_run()
    run.bindings["app-1"] = Binding(19, 0.0, "a", "pending")
    with pytest.raises(AssertionError, match="app-1 bound before"):
        shared_mod.test_shared_claim_every_pod_waits_then_binds(run)


def test_sch_8_fails_when_the_first_device_alone_lets_the_pod_bind() -> None:
    good = multi_mod.Multi(
        "a", _allocation(10, "a-fabric-0", "a-fabric-1"), 12, None, 20, Binding(25, 0.0, "a", "ready")
    )
    multi_mod.test_every_device_of_a_claim_gates_binding(good)
    with pytest.raises(AssertionError, match="second device"):
        multi_mod.test_every_device_of_a_claim_gates_binding(dataclasses.replace(good, early=Binding(15, 0, "a", "x")))
    with pytest.raises(AssertionError, match="before the second device"):
        multi_mod.test_every_device_of_a_claim_gates_binding(
            dataclasses.replace(good, binding=Binding(18, 0, "a", "x"))
        )
