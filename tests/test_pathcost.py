"""Unit tests of the path's cost (observe/pathcost.py): rounds, attaches and time against the model's minimum.

The record is written by hand (allocations, events and probe changes as the recorder would hold them): no cluster.
"""

from __future__ import annotations

from typing import Any

from conformance.cluster.bench_history import suite_figures
from conformance.observe.pathcost import path_cost, time_bound
from conformance.observe.recorder import Record
from conformance.observe.views import Allocation, Binding, Event
from conformance.report.figures import path_cost_lines
from conformance.report.html import _path_cost

NODE = "node-3"
FABRIC = {"bindingConditions": ["d/attached"], "bindingFailureConditions": ["d/attach-failed", "d/reschedule"]}
MEANINGS = {"d/attach-failed": "failure", "d/reschedule": "reschedule"}


def _allocation(rev: int, at: float, device: str, *, fabric: bool = True, cleared: tuple[int, float] | None = None,
                reschedule: bool = False) -> Allocation:  # fmt: skip
    result = {"driver": "d", "pool": "fabric-1" if fabric else NODE, "device": device} | (FABRIC if fabric else {})
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}
    a = Allocation(rev, at, {"devices": {"results": [result]}, "nodeSelector": selector})
    if cleared:
        a.cleared_revision, a.cleared_at = cleared
    if reschedule:
        a.failures.append({"type": "d/reschedule", "status": "True", "device": ("fabric-1", device), "revision": rev})
    return a


def _probe(seq: int, at: float, device: str, state: str, previous: list[str]) -> Record:
    body: dict[str, Any] = {"device": device, "node": NODE, "state": state, "previous": previous}
    return Record(seq, at, "probe", "CHANGED", "", device, None, body)


def _claim_event(rev: int, at: float, device: str, ctype: str) -> Event:
    entry = {"driver": "d", "pool": "fabric-1", "device": device}
    status = {"devices": [entry | {"conditions": [{"type": ctype, "status": "True", "reason": "R"}]}]}
    return Event(rev, at, "claim", "app-gpu", False, {"status": {"allocation": {}, "devices": status["devices"]}})


def _cost(model: str, allocations: list[Allocation], probe: list[Record], bound_at: float, rev: int, **kw: Any):  # type: ignore[no-untyped-def]
    return path_cost(
        model=model,
        node=NODE,
        devices=1,
        attach_s=10.0,
        events=kw.get("events", []),
        allocations=allocations,
        binding=Binding(rev, bound_at, NODE, "ready"),
        probe=probe,
        fabric_devices={"uuid-a", "uuid-b"},
        whole_node=False,
        meanings=MEANINGS,
    )


def test_keep_in_pool_at_its_minimum_has_no_detour() -> None:
    cost = _cost(
        "keep-in-pool",
        [_allocation(10, 100.0, "a")],
        [_probe(1, 100.2, "uuid-a", "attaching", []), _probe(2, 101.2, "uuid-a", "attached", [NODE, "attaching"])],
        105.3,
        14,
    )
    assert (cost.rounds, cost.attaches, cost.detaches) == (1, 1, 0)
    assert not cost.rounds_problems() + cost.attach_problems() + cost.time_problems()
    assert cost.as_dict()["schedulingRounds"] == {"measured": 1, "minimum": 1}


def test_reschedule_to_local_needs_two_rounds_and_one_attach() -> None:
    allocations = [
        _allocation(10, 100.0, "a", cleared=(13, 106.1), reschedule=True),
        _allocation(15, 107.2, "a", fabric=False),
    ]
    probe = [_probe(1, 100.2, "uuid-a", "attaching", []), _probe(2, 101.2, "uuid-a", "attached", [NODE, "attaching"])]
    cost = _cost("reschedule-to-local", allocations, probe, 107.3, 16)
    assert not cost.rounds_problems() + cost.attach_problems() + cost.time_problems()
    # ...but the same path is a detour for keep-in-pool
    assert "needs 1" in _cost("keep-in-pool", allocations, probe, 107.3, 16).rounds_problems()[0]


def test_a_reschedule_that_lands_on_the_fabric_again_is_a_detour_with_its_timeline() -> None:
    allocations = [
        _allocation(10, 100.0, "a", cleared=(13, 106.1), reschedule=True),
        _allocation(15, 107.2, "b"),
    ]
    probe = [
        _probe(1, 100.2, "uuid-a", "attaching", []),
        _probe(2, 101.2, "uuid-a", "attached", [NODE, "attaching"]),
        _probe(3, 107.4, "uuid-b", "attached", []),
    ]
    events = [_claim_event(12, 101.5, "a", "d/reschedule")]
    cost = _cost("reschedule-to-local", allocations, probe, 112.0, 18, events=events)
    (refetched,) = cost.rounds_problems()
    assert "allocated the fabric device(s) fabric-1/b again (r15)" in refetched
    assert cost.attach_problems() == [
        f"2 attaches to {NODE} before the pod bound; its claim asks for 1 device(s): one attach each"
    ]
    timeline = cost.timeline()
    for seen in ("r10  claim allocated fabric-1/a", "r12  condition d/reschedule=True (R)", "r13  claim deallocated",
                 "probe  fabric: uuid-b attached on node-3, was free (attach)", "r18  pod bound"):  # fmt: skip
        assert seen in timeline, timeline


def test_a_needless_detach_and_attach_is_counted() -> None:
    probe = [
        _probe(1, 100.2, "uuid-a", "attaching", []),
        _probe(2, 101.2, "uuid-a", "attached", [NODE, "attaching"]),
        _probe(3, 101.6, "uuid-a", "detaching", [NODE, "attached"]),
        _probe(4, 102.6, "uuid-a", "attaching", [NODE, "detaching"]),
        _probe(5, 103.6, "uuid-a", "attached", [NODE, "attaching"]),
        _probe(6, 130.0, "uuid-a", "detaching", [NODE, "attached"]),  # after the binding: not on the way
    ]
    cost = _cost("keep-in-pool", [_allocation(10, 100.0, "a")], probe, 110.0, 14)
    assert (cost.attaches, cost.detaches) == (2, 1)
    assert len(cost.attach_problems()) == 2


def test_a_detach_of_a_device_attached_before_the_pod_is_not_its_detour() -> None:
    probe = [_probe(1, 100.5, "uuid-b", "detaching", [NODE, "attached"]), _probe(2, 100.6, "uuid-a", "attached", [])]
    cost = _cost("keep-in-pool", [_allocation(10, 100.0, "a")], probe, 105.0, 14)
    assert (cost.attaches, cost.detaches) == (1, 0)


def test_time_bound_per_model_and_a_slow_path_fails() -> None:
    assert time_bound("keep-in-pool", 10.0) == 20.0
    assert time_bound("reschedule-to-local", 10.0) == 25.0
    cost = _cost("keep-in-pool", [_allocation(10, 100.0, "a")], [_probe(1, 100.2, "uuid-a", "attached", [])], 121.0, 14)
    assert "21.0s from the first allocation to the binding; bound 20s" in cost.time_problems()[0]


def test_the_figures_reach_the_bench_the_figures_printout_and_the_html() -> None:
    allocations = [_allocation(10, 100.0, "a", cleared=(13, 106.1), reschedule=True), _allocation(15, 107.2, "b")]
    cost = _cost("reschedule-to-local", allocations, [_probe(1, 100.2, "uuid-a", "attached", [])], 108.0, 18)
    report = {"pathCost": cost.as_dict()}
    figs = suite_figures(report)
    assert (figs["path scheduling rounds"].value, figs["path attaches"].value) == (2, 1)
    assert figs["path allocation-to-binding"].value == 8.0
    lines = "\n".join(path_cost_lines(report["pathCost"]))
    assert "scheduling rounds              2 (minimum 2)" in lines and "detour: after ['d/reschedule']" in lines
    page = _path_cost(report["pathCost"])
    assert "<td>minimum 2</td>" in page and "Detours:" in page and "r15  claim allocated fabric-1/b" in page
    assert "not measured" in _path_cost(None)
