"""What a claim stood at when its pod bound is read once the claim stream has delivered up to the binding's revision:
the pod and the claim streams are two watches, and under load the bind can arrive first. The record is fed by hand
and the context, the readiness probe and the late stream are fakes (a thread feeding the claim changes still in
flight): what is tested is when the readers read, not the watch plumbing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.observe import views
from conformance.observe.recorder import Recorder
from conformance.observe.views import History
from conformance.suite.implementation.outcome import follow, outcome
from conformance.suite.implementation.readiness import judge

DRIVER = "gpu.example.com"
READY = "x/ready"
LATE_S = 0.3  # how long the claim stream trails the pod stream here


def _claim(rv: int, pool: str | None, *, ns: str = "ns", stamp: str = "", ready: bool | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if pool:
        result = {"driver": DRIVER, "pool": pool, "device": "d0", "request": "r"}
        if ready is not None:
            result["bindingConditions"] = [READY]
            entry = {"driver": DRIVER, "pool": pool, "device": "d0"}
            status["devices"] = [entry | {"conditions": [{"type": READY, "status": str(ready)}]}]
        status["allocation"] = {"allocationTimestamp": stamp or f"t{rv}", "devices": {"results": [result]}}
    return {"metadata": {"name": "c", "namespace": ns, "resourceVersion": str(rv)}, "status": status}


def _pod(rv: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(rv)},
        "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]},
    }


@contextmanager
def _in_flight(rec: Recorder, *claims: dict[str, Any]) -> Iterator[None]:
    """The claim stream delivers `claims` LATE_S from now (the readers wait meanwhile)."""

    def late() -> None:
        time.sleep(LATE_S)
        for obj in claims:
            rec.feed("claim", "MODIFIED", obj)

    feeder = threading.Thread(target=late)
    feeder.start()
    try:
        yield
    finally:
        feeder.join()


def _ctx() -> Any:
    profile = SimpleNamespace(binding_model="reschedule-to-local", failure_conditions={}, identity_attribute="uuid")
    return SimpleNamespace(profile=profile, invariants=None, probe=None, leases=[], identity=lambda pool, dev: "U0")


@pytest.mark.parametrize("read", ["follow", "outcome"])  # outcome(): IMP-20's read, and the restarts' after a timeout
def test_an_allocation_standing_at_the_bind_is_not_the_outcome_while_its_clearing_is_in_flight(read: str) -> None:
    """Reschedule-to-local: the fabric allocation (r2020) and the bind (r2027) delivered, the clearing (r2023) and the
    node-local allocation (r2026) still in flight: the outcome is the node-local one, not the fabric one."""
    rec = Recorder(None, "r", "uuid")
    rec.feed("claim", "ADDED", _claim(2020, "fabric", ready=True))
    rec.feed("pod", "MODIFIED", _pod(2027))
    history = History(rec, "ns")
    other = _claim(2031, "fabric", ns="other")  # any later claim write moves the stream past the bind
    with _in_flight(rec, _claim(2023, None), _claim(2026, "n1-local"), other):
        seen = follow(_ctx(), history, "n1", timeout=5.0) if read == "follow" else outcome(_ctx(), history, "n1")
    assert seen.final is not None and seen.final.devices == [("n1-local", "d0")], seen.describe()
    assert seen.path == "local" and seen.lag is None


def test_a_wrong_final_allocation_is_still_read_as_such() -> None:
    """The fabric allocation still stood at the bind (its clearing came after it): the outcome is the fabric one."""
    rec = Recorder(None, "r", "uuid")
    rec.feed("claim", "ADDED", _claim(2020, "fabric", ready=True))
    rec.feed("pod", "MODIFIED", _pod(2027))
    rec.feed("claim", "MODIFIED", _claim(2030, None))
    seen = follow(_ctx(), History(rec, "ns"), "n1", timeout=5.0)
    assert seen.final is not None and seen.path == "fabric"


def test_a_claim_stream_that_never_catches_up_is_read_anyway_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "CATCH_UP_S", 0.2)
    rec = Recorder(None, "r", "uuid")
    rec.feed("claim", "ADDED", _claim(2020, "fabric", ready=True))
    rec.feed("pod", "MODIFIED", _pod(2027))
    seen = follow(_ctx(), History(rec, "ns"), "n1", timeout=5.0)
    assert seen.path == "fabric"  # what was delivered: judged, not excused
    assert seen.lag and "deliver revision 2027" in seen.lag and "delivered up to revision 2020" in seen.lag
    assert "claim stream" in seen.describe()


def test_a_bookmark_counts_as_delivered() -> None:
    rec = Recorder(None, "r", "uuid")
    rec.feed("claim", "ADDED", _claim(10, "fabric"))
    rec.feed("pod", "MODIFIED", _pod(15))
    rec.progressed("claim", 15)
    assert rec.high_water("claim") == 15 and rec.high_water("pod") == 15
    assert History(rec, "ns").catch_up(History(rec, "ns").binding(), "the bind") is None  # type: ignore[arg-type]


class _Ready:
    """A readiness probe that says every device was ready where asked."""

    def ready_problem(self, device: str, node: str | None, moment: float, what: str) -> str | None:
        return None


def test_rdy4_a_bind_delivered_before_its_allocation_is_not_a_binding_without_one() -> None:
    """The claim's allocation (r10) and its readiness (r12) still in flight when the bind (r15) arrives."""
    rec = Recorder(None, "r", "uuid")
    rec.feed("claim", "ADDED", _claim(5, None))
    rec.feed("pod", "MODIFIED", _pod(15))
    allocated = _claim(10, "n1", stamp="t", ready=False)
    with _in_flight(rec, allocated, _claim(12, "n1", stamp="t", ready=True), _claim(20, "n1", ns="other")):
        gate = judge(_ctx(), History(rec, "ns"), "n1", _Ready(), "c", "p")  # type: ignore[arg-type]
    assert not gate.unready_binding and gate.lag is None, gate.describe()
    assert gate.binding is not None and gate.binding.claim_state == "ready"


def test_rdy4_a_binding_with_no_allocation_still_fails() -> None:
    rec = Recorder(None, "r", "uuid")
    rec.feed("claim", "ADDED", _claim(5, None))
    rec.feed("pod", "MODIFIED", _pod(15))
    rec.feed("claim", "MODIFIED", _claim(20, "n1", stamp="t", ready=True))  # allocated only after the binding
    gate = judge(_ctx(), History(rec, "ns"), "n1", _Ready(), "c", "p")  # type: ignore[arg-type]
    assert gate.unready_binding == ["the pod bound at revision 15 with no allocation of its claim"]


def _listing(*claims: tuple[str, int]) -> Any:
    """A stand-in cluster (a fake, said so) whose quorum list of the namespace's claims answers `claims`."""
    items = [SimpleNamespace(metadata=SimpleNamespace(name=n, resource_version=str(rv))) for n, rv in claims]
    listed = SimpleNamespace(items=items)
    return SimpleNamespace(resource=SimpleNamespace(list_namespaced_resource_claim=lambda ns: listed))


def test_a_quiet_claim_stream_is_caught_up_once_the_namespaces_claims_are_as_recorded() -> None:
    """A scenario alone: no claim written after the bind, the stream's high water stays behind it. The apiserver's
    list says the namespace's claim is at the revision last recorded: nothing is in flight, read at once."""
    rec = Recorder(_listing(("c", 2026)), "r", "uuid")  # type: ignore[arg-type]
    rec.feed("claim", "ADDED", _claim(2020, "fabric", ready=True))
    rec.feed("claim", "MODIFIED", _claim(2026, "n1-local"))
    rec.feed("pod", "MODIFIED", _pod(2027))
    started = time.monotonic()
    seen = follow(_ctx(), History(rec, "ns"), "n1", timeout=5.0)
    assert time.monotonic() - started < 2.0 and seen.lag is None, seen.describe()
    assert seen.final is not None and seen.final.devices == [("n1-local", "d0")]


def test_a_claim_newer_in_the_apiserver_than_in_the_record_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list says the claim is at 2026, the record holds 2020 only: the clearing and the reallocation are in
    flight; not read until the deadline (then said)."""
    monkeypatch.setattr(views, "CATCH_UP_S", 0.3)
    rec = Recorder(_listing(("c", 2026)), "r", "uuid")  # type: ignore[arg-type]
    rec.feed("claim", "ADDED", _claim(2020, "fabric", ready=True))
    rec.feed("pod", "MODIFIED", _pod(2027))
    seen = follow(_ctx(), History(rec, "ns"), "n1", timeout=5.0)
    assert seen.lag is not None and "revision 2027" in seen.lag, seen.describe()
