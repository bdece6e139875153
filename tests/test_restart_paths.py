"""IMP-8's restart between the steps of the detach and failure paths (suite/implementation/restart_paths.py):
when a path cell counts as walked, when a failure found while the role was down counts as lost, and the report guard's
admission expression (conformance/cluster/reportguard.py). Pure code: stand-ins for the record, the probe and the
staged cell."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from conformance.cluster.reportguard import PROBE, _expression
from conformance.observe.recorder import Sample
from conformance.observe.views import Allocation, Binding, Event
from conformance.suite.implementation.restart_cells import Restart
from conformance.suite.implementation.restart_paths import _not_retried, report_owed, walked

NODE, FAILED, KILLED = "node-1", "gpu-0", 100.0
FAILURE = "gpu.fabric.example.com/attach-failed"


class _History:
    def __init__(self, report_at: float | None = None, bound_at: float | None = None) -> None:
        result = {
            "driver": "d",
            "pool": "p",
            "device": FAILED,
            "bindingConditions": ["d/attached"],
            "bindingFailureConditions": [FAILURE],
        }
        claim: dict[str, Any] = {
            "metadata": {"name": "c"},
            "status": {"allocation": {"devices": {"results": [result]}}},
        }
        self._events = [Event(10, 90.0, "claim", "c", False, claim)]
        if report_at is not None:
            condition = {"type": FAILURE, "status": "True", "reason": "R", "message": "m"}
            devices = [{"driver": "d", "pool": "p", "device": FAILED, "conditions": [condition]}]
            reported = {**claim, "status": {**claim["status"], "devices": devices}}
            self._events.append(Event(11, report_at, "claim", "c", False, reported))
        self.bound_at = bound_at

    def events(self, kind: str | None = None) -> list[Event]:
        return [e for e in self._events if kind in (None, e.kind)]

    def allocations(self) -> list[Allocation]:
        first = Allocation(10, 90.0, self._events[0].obj["status"]["allocation"])
        if len(self._events) > 1:
            condition = self._events[1].obj["status"]["devices"][0]["conditions"][0]
            first.failures.append({**condition, "device": ("p", FAILED), "revision": 11})
        return [first]

    def binding(self) -> Binding | None:
        return None if self.bound_at is None else Binding(20, self.bound_at, NODE, "ready")


class _Probe:
    def __init__(self, listed_at: list[float]) -> None:
        self.listed_at = listed_at

    def after(self, at: float, timeout: float = 10.0) -> dict[str, tuple[str, str]]:
        return {FAILED: (NODE, "attaching")} if any(abs(at - t) < 0.05 for t in self.listed_at) else {}

    def samples(self, since: float = 0.0) -> list[Sample]:
        at = [since + 0.1 * i for i in range(200)]
        return [
            Sample(t, t, {FAILED: (NODE, "attaching")} if any(abs(t - x) < 0.05 for x in self.listed_at) else {})
            for t in at
        ]


def _cell(name: str, history: _History, probe: _Probe) -> tuple[Any, Any]:
    seen = Restart(name, "controller", NODE, device=FAILED)
    s = SimpleNamespace(seen=seen, history=history)
    profile = SimpleNamespace(meaning=lambda t: "failure", promises=SimpleNamespace(attach_s=10.0))
    return SimpleNamespace(probe=probe, profile=profile), s


def test_a_failure_reported_before_the_kill_is_what_failed_reported_needs_and_failed_hidden_must_not_have() -> None:
    ctx, s = _cell("failed-reported", _History(report_at=KILLED - 1), _Probe([]))
    assert walked(ctx, s, KILLED, KILLED) == ""
    ctx, s = _cell("failed-reported", _History(), _Probe([]))
    assert "no failure condition meaning failure was True before the kill" in walked(ctx, s, KILLED, KILLED)
    ctx, s = _cell("failed-reported", _History(report_at=KILLED - 6, bound_at=KILLED - 0.5), _Probe([]))
    assert "bound again before the kill" in walked(ctx, s, KILLED, KILLED)
    ctx, s = _cell("failed-hidden", _History(report_at=KILLED - 1), _Probe([]))
    assert "the guard did not hold it" in walked(ctx, s, KILLED, KILLED)
    ctx, s = _cell("failed-hidden", _History(report_at=KILLED + 5), _Probe([]))
    assert walked(ctx, s, KILLED, KILLED) == ""


def test_a_step_let_happen_while_the_role_was_down_must_have_happened_before_its_start() -> None:
    came = KILLED + 2
    ctx, s = _cell("failed-seen", _History(), _Probe([came]))  # still attaching when the role was started
    assert "still attaching on the fabric" in walked(ctx, s, KILLED, came)
    ctx, s = _cell("released-detached", _History(), _Probe([]))
    assert walked(ctx, s, KILLED, came) == ""


def test_a_failure_found_while_the_role_was_down_is_lost_when_neither_tried_again_nor_reported() -> None:
    back = KILLED + 3
    history = _History()
    first = history.allocations()[0]
    ctx, s = _cell("failed-seen", history, _Probe([]))
    lost = _not_retried(ctx, s, first, back)
    assert lost.startswith(f"the failed attach of {FAILED} was lost across the restart"), lost
    ctx, s = _cell("failed-seen", history, _Probe([back + 1.0]))  # the restarted stack tried it again
    assert _not_retried(ctx, s, first, back) == ""
    ctx, s = _cell("failed-seen", _History(report_at=back + 2), _Probe([]))  # or reported it
    assert _not_retried(ctx, s, _History(report_at=back + 2).allocations()[0], back) == ""
    first.cleared_at = back + 1  # the binding timeout took the allocation first: nothing to judge
    assert _not_retried(ctx, s, first, back) == ""


def test_the_report_guard_refuses_only_a_failure_and_knows_when_it_is_in_force() -> None:
    text = _expression(("gpu.fabric.example.com/reschedule",))
    assert f"object.metadata.name != '{PROBE}'" in text, "the dry-run probe that says the guard is in force"
    assert "c.type != 'gpu.fabric.example.com/reschedule'" in text, "a reschedule is the happy path: never held"
    assert "c.type in r.bindingFailureConditions" in text and "c.status == 'True'" in text
    assert "r.driver == d.driver && r.pool == d.pool && r.device == d.device" in text


def test_a_held_failure_report_is_owed_while_its_allocation_stands_past_attach_seconds_after_the_suite_let_go() -> None:
    """A condition writer restarted with its report held (failed-hidden) that never reports is caught whenever the
    allocation stood attachSeconds past the guard's lift; cleared before that (the binding timeout), nothing was owed.
    No longer excused merely because the suite held the report 5 s or more."""
    first = Allocation(10, 90.0, {})
    assert report_owed(first, 130.0), "still allocated: owed"
    first.cleared_revision, first.cleared_at = 30, 140.0
    assert report_owed(first, 130.0), "stood past the promise after the lift: owed"
    first.cleared_at = 120.0
    assert not report_owed(first, 130.0), "cleared by the timeout within the promise: not owed"
    first.cleared_at = 130.4
    assert not report_owed(first, 130.0), "delivered 0.4 s past the promise: within the claim stream's lag"
