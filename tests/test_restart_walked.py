"""IMP-8's walked check (conformance/suite/implementation/restart_walked.py) for a role restarted by a command: the
pending-free cell is staged deterministically (its pod held at a scheduling gate until the command returned), so a
cell found allocated and attaching at the kill is not walked, a failure: never "the staging missed", a skip. Pure
code: stand-ins for the record (claim events), the fabric probe and the staged cell."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from conformance.cluster.manifests import SUITE_GATE, held_at_gate, pinned_pod
from conformance.observe.views import Event
from conformance.suite.implementation.restart_cells import Restart
from conformance.suite.implementation.restart_walked import came_back

NODE, DEVICE = "node-1", "gpu-0"
KILLED = 100.0


class _History:
    def __init__(self, allocated_at: float | None) -> None:
        claim: dict[str, Any] = {"metadata": {"name": "app-dev"}, "status": {}}
        self._events = [Event(1, 90.0, "claim", "app-dev", False, claim)]
        if allocated_at is not None:
            result = {"driver": "d", "pool": "p", "device": DEVICE}
            allocated = {**claim, "status": {"allocation": {"devices": {"results": [result]}}}}
            self._events.append(Event(2, allocated_at, "claim", "app-dev", False, allocated))

    def events(self, kind: str | None = None) -> list[Event]:
        return [e for e in self._events if kind in (None, e.kind)]


class _Probe:
    def __init__(self, attaching_from: float | None) -> None:
        self.attaching_from = attaching_from

    def after(self, at: float, timeout: float = 10.0) -> dict[str, tuple[str, str]]:
        on = self.attaching_from is not None and at >= self.attaching_from - 0.05
        return {DEVICE: (NODE, "attaching")} if on else {}

    def samples(self, since: float = 0.0) -> list[Any]:
        return []


def _staged(allocated_at: float | None, attaching_from: float | None) -> tuple[Any, Any]:
    seen = Restart("pending-free", "controller", NODE, device=DEVICE)
    cell = SimpleNamespace(seen=seen, history=_History(allocated_at), kill_seen=None, lease=None)
    cell.cell = seen.spec
    ctx = SimpleNamespace(probe=_Probe(attaching_from), counted=False)
    return ctx, cell


def test_a_gated_pending_free_cell_is_walked_at_a_command_restart() -> None:
    ctx, s = _staged(allocated_at=None, attaching_from=None)
    came_back(ctx, {"pending-free": s}, KILLED, KILLED, KILLED + 3, process=False)  # type: ignore[arg-type]
    assert s.seen.walked == "" and s.seen.skipped == ""
    assert s.seen.at_kill_seen == ("pending", "free")


def test_a_pending_free_cell_allocated_before_the_kill_is_not_walked_not_skipped() -> None:
    # What the gate rules out: the claim allocated and the old controller attaching before the command killed it.
    ctx, s = _staged(allocated_at=KILLED - 0.5, attaching_from=KILLED - 0.4)
    came_back(ctx, {"pending-free": s}, KILLED, KILLED, KILLED + 3, process=False)  # type: ignore[arg-type]
    assert s.seen.skipped == "", "a miss is never a skip"
    assert "the cell needs pending x free" in s.seen.walked and s.seen.result() == "not walked"
    assert s.seen.binding() == [f"the cell was not walked: {s.seen.walked}"]


def test_the_gate_keeps_the_pod_from_the_scheduler() -> None:
    pod = held_at_gate(pinned_pod("app", "gpu", NODE))
    assert pod["spec"]["schedulingGates"] == [{"name": SUITE_GATE}]
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": NODE}
