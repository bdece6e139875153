"""The outcome judgement of the implementation scenarios fails on what a broken implementation would show, under
both binding models. Allocations, bindings and probe answers are hand-made (a fake, said so here): what is tested
is the verdict, not the watch plumbing, which the suite's runs exercise against a real apiserver."""

from __future__ import annotations

from typing import Any

from conformance.observe.recorder import Sample
from conformance.observe.views import Allocation, Binding
from conformance.suite.implementation.outcome import Outcome, early_conditions

RESCHEDULE, FAILED, READY = "x/reschedule", "x/failed", "x/ready"
MEANINGS = {RESCHEDULE: "reschedule", FAILED: "failure"}


def _alloc(rev: int, pool: str, device: str, *, fabric: bool, cleared: int | None = None, **kw: Any) -> Allocation:
    result: dict[str, Any] = {"driver": "d", "pool": pool, "device": device, "request": "r"}
    if fabric:
        result |= {"bindingConditions": [READY], "bindingFailureConditions": [RESCHEDULE, FAILED]}
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    a = Allocation(rev, float(rev), {"devices": {"results": [result]}, "nodeSelector": selector})
    a.cleared_revision, a.cleared_at = cleared, float(cleared) if cleared else None
    for key, value in kw.items():
        setattr(a, key, value)
    return a


def _outcome(allocations: list[Allocation], node: str = "n1", attached: str | None = "U1") -> Outcome:
    final = allocations[-1]
    seen = Outcome(
        node="n1",
        model="reschedule-to-local",
        binding=Binding(final.revision + 1, final.at + 1, node, "ready"),
        allocations=allocations,
        final=final,
        identity={("fabric", "f1"): "U1", ("n1", "f1"): "U1", ("fabric", "f2"): "U2", ("fabric", "e0"): None},
        local_node={("fabric", "f1"): "", ("n1", "f1"): "n1", ("fabric", "e0"): ""},
        meanings=MEANINGS,
        probed=True,
        at_bind={attached: ("n1", "attached")} if attached else {},
    )
    return seen


def test_keep_in_pool_binding_with_the_fabric_allocation_is_the_outcome() -> None:
    seen = _outcome([_alloc(1, "fabric", "f1", fabric=True)])
    assert seen.path == "fabric" and not seen.binding_problems()


def test_reschedule_to_local_through_a_reschedule_condition_is_the_outcome() -> None:
    first = _alloc(1, "fabric", "f1", fabric=True, cleared=5, failures=[{"type": RESCHEDULE}])
    seen = _outcome([first, _alloc(6, "n1", "f1", fabric=False)])
    assert seen.path == "local" and not seen.binding_problems() and seen.rescheduled() == [first]


def test_an_allocation_edited_in_place_fails() -> None:
    first = _alloc(1, "fabric", "f1", fabric=True, cleared=5, rewritten=True)
    problems = _outcome([first, _alloc(5, "n1", "f1", fabric=False)]).binding_problems()
    assert any("edited in place" in p for p in problems), problems


def test_a_detour_through_a_failure_condition_fails_and_a_timeout_fails_only_when_strict() -> None:
    failed = _alloc(1, "fabric", "f2", fabric=True, cleared=5, failures=[{"type": FAILED}])
    via_failure = _outcome([failed, _alloc(6, "fabric", "f1", fabric=True)])
    assert any("meaning failure" in p for p in via_failure.detours())
    assert not via_failure.detours(failures=True)  # a scenario's staging pod: its failure path is judged elsewhere
    edited = _alloc(1, "fabric", "f2", fabric=True, cleared=5, rewritten=True)
    assert _outcome([edited, _alloc(6, "fabric", "f1", fabric=True)]).detours(failures=True)  # never tolerated
    timed_out = _alloc(1, "fabric", "f1", fabric=True, cleared=5)
    seen = _outcome([timed_out, _alloc(6, "n1", "f1", fabric=False)])
    assert not seen.detours() and seen.detours(timeouts=False) and not seen.rescheduled()


def test_the_node_local_copy_of_another_device_or_not_attached_fails() -> None:
    first = _alloc(1, "fabric", "f2", fabric=True, cleared=5, failures=[{"type": RESCHEDULE}])
    problems = _outcome([first, _alloc(6, "n1", "f1", fabric=False)]).binding_problems()
    assert any("the node-local copy is of" in p for p in problems), problems
    problems = _outcome([_alloc(1, "fabric", "f1", fabric=True)], attached=None).binding_problems()
    assert any("the fabric says None" in p for p in problems), problems
    problems = _outcome([_alloc(1, "fabric", "f1", fabric=True)], node="n2").binding_problems()
    assert any("bound to n2" in p for p in problems), problems


class _Probe:
    """Answers as the fabric probe would, one every 0.5 s from t=0 (a fake): U1 attached on n1 in [attached_from,
    leaving_from), detaching after."""

    def __init__(self, attached_from: float, leaving_from: float = 1e9) -> None:
        self.answers = [
            Sample(t, t + 0.05, {"U1": ("n1", _state(t, attached_from, leaving_from))})
            for t in (k * 0.5 for k in range(40))
        ]

    def samples(self, since: float = 0.0) -> list[Sample]:
        return [x for x in self.answers if x.sent >= since]

    def after(self, at: float) -> dict[str, tuple[str, str]]:
        return next(x.states for x in self.answers if x.sent >= at)


def _state(t: float, attached_from: float, leaving_from: float) -> str:
    return "attaching" if t < attached_from else "attached" if t < leaving_from else "detaching"


def test_a_condition_true_before_the_attach_completed_is_early_also_for_a_count_entry() -> None:
    fabric = _alloc(1, "fabric", "f1", fabric=True, true_at={("fabric", "f1", READY): (2, 2.0)})
    assert early_conditions(_outcome([fabric]), _Probe(attached_from=3.0))  # type: ignore[arg-type]
    assert not early_conditions(_outcome([fabric]), _Probe(attached_from=1.0))  # type: ignore[arg-type]
    # A count entry has no identity: the device is the node-local copy's the claim moved to.
    entry = _alloc(
        1, "fabric", "e0", fabric=True, cleared=5, failures=[{"type": RESCHEDULE}],
        true_at={("fabric", "e0", RESCHEDULE): (3, 3.0)},
    )  # fmt: skip
    seen = _outcome([entry, _alloc(6, "n1", "f1", fabric=False)])
    assert early_conditions(seen, _Probe(attached_from=4.0))  # type: ignore[arg-type]
    assert not early_conditions(seen, _Probe(attached_from=2.0))  # type: ignore[arg-type]


def test_a_true_write_delivered_late_while_the_device_already_leaves_is_not_early() -> None:
    """As IMP-3's run-wide clause (tests/test_order.py): attached in the answer just before the write's delivery and
    detaching in the one after is the claim stream's lag (a stack that detaches at once), not an early condition;
    attaching before it is still early."""
    fabric = _alloc(1, "fabric", "f1", fabric=True, true_at={("fabric", "f1", READY): (2, 2.2)})
    assert not early_conditions(_outcome([fabric]), _Probe(attached_from=1.0, leaving_from=2.5))  # type: ignore[arg-type]
    assert early_conditions(_outcome([fabric]), _Probe(attached_from=3.0))  # type: ignore[arg-type]
