"""Unit tests of the invariant watcher's verdicts, fed with hand-made watch events.

The record is fed by hand instead of by watches (a fake, said so here): what is tested is the judgement — held
twice, offered twice only when it persists, bound early by revision order — not the API plumbing, which the suite's
runs exercise against a real apiserver.
"""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace
from typing import Any

from conformance.observe.invariants import InvariantWatcher
from conformance.observe.recorder import Recorder, Sample
from conformance.observe.views import binding_state

DRIVER = "gpu.example.com"


_names = itertools.count()


def _claim(name: str, rv: int, device: str | None, conditions: dict[str, str] | None = None) -> dict[str, Any]:
    claim: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}, "status": {}}
    if device:
        result = {"driver": DRIVER, "pool": "fabric", "device": device, "request": "r"}
        result |= {"bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/failed"]}
        claim["status"]["allocation"] = {"devices": {"results": [result]}}
        if conditions:
            conds = [{"type": t, "status": s} for t, s in conditions.items()]
            claim["status"]["devices"] = [{"driver": DRIVER, "pool": "fabric", "device": device, "conditions": conds}]
    return claim


def _pod(name: str, rv: int, node: str | None, claim: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)},
        "spec": {"nodeName": node},
        "status": {"resourceClaimStatuses": [{"name": "dev", "resourceClaimName": claim}]},
    }


def _watcher(
    slices: list[dict[str, Any]] | None = None, claims: list[dict[str, Any]] | None = None
) -> InvariantWatcher:
    record = Recorder(None, "r", "uuid")
    for obj in slices or []:
        record.feed("slice", "ADDED", obj)
    for obj in claims or []:
        record.feed("claim", "ADDED", obj)
    w = InvariantWatcher(record, DRIVER, "uuid")
    w.follow()
    return w


def _event(w: InvariantWatcher, kind: str, event: str, obj: dict[str, Any]) -> None:
    w.record.feed(kind, event, obj)
    w.follow()


def _slice(*devices: tuple[str, str]) -> dict[str, Any]:
    devs = [{"name": n, "attributes": {"uuid": {"string": u}}} for n, u in devices]
    return {
        "metadata": {"name": f"s{next(_names)}"},
        "spec": {"driver": DRIVER, "pool": {"name": "fabric"}, "devices": devs},
    }


def test_binding_state() -> None:
    assert binding_state(_claim("c", 1, None)) == "none"
    assert binding_state(_claim("c", 1, "d0")) == "pending"
    assert binding_state(_claim("c", 1, "d0", {"x/ready": "True"})) == "ready"
    assert binding_state(_claim("c", 1, "d0", {"x/ready": "True", "x/failed": "True"})) == "failed"


def test_a_pod_bound_before_its_claim_was_ready_is_a_violation_by_revision() -> None:
    w = _watcher()
    _event(w, "claim", "ADDED", _claim("early", 10, "d0"))
    _event(w, "claim", "MODIFIED", _claim("early", 30, "d0", {"x/ready": "True"}))
    _event(w, "claim", "ADDED", _claim("fine", 11, "d1"))
    _event(w, "claim", "MODIFIED", _claim("fine", 15, "d1", {"x/ready": "True"}))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "early"))  # revision 20: claim ready only at 30
    _event(w, "pod", "MODIFIED", _pod("b", 20, "node-0", "fine"))  # ready at 15 < 20
    w._check_binds(final=True)
    assert [(v.what, v.identity) for v in w.violations] == [("bound-early", "ns/a")]
    assert "ns/early was pending" in str(w.violations[0])


def test_a_bind_seen_before_the_claim_stream_caught_up_waits_instead_of_guessing() -> None:
    w = _watcher()
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))
    w._check_binds(final=False)
    assert not w.violations and len(w._binds) == 1, "must wait for the claim stream (ready may be at 19)"
    _event(w, "claim", "MODIFIED", _claim("c", 19, "d0", {"x/ready": "True"}))
    w._check_binds(final=True)
    assert not w.violations


def test_a_claim_stream_lagging_seconds_behind_the_bind_is_no_bound_early() -> None:
    """The claim became ready at 19, the pod bound at 20; the claim stream has delivered only up to 10 three seconds
    after the bind was delivered (under load): the bind waits for the stream, however long it lags."""
    w = _watcher()
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))
    w._binds[0].at -= 3.0
    w._check_binds(final=False)
    assert not w.violations and len(w._binds) == 1
    _event(w, "claim", "MODIFIED", _claim("c", 19, "d0", {"x/ready": "True"}))
    _event(w, "claim", "ADDED", _claim("other", 21, None))  # any later claim write: the stream is past the bind
    w._check_binds(final=False)
    assert not w.violations and not w._binds


def test_a_real_bound_early_is_judged_once_the_claim_stream_is_past_the_bind() -> None:
    w = _watcher()
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))
    _event(w, "claim", "MODIFIED", _claim("c", 30, "d0", {"x/ready": "True"}))
    w._check_binds(final=False)
    assert [(v.what, v.identity) for v in w.violations] == [("bound-early", "ns/a")]
    assert "only up to" not in str(w.violations[0])


def test_a_scenario_verdict_judges_a_bind_the_claim_stream_never_passed() -> None:
    """No claim written after the binding (a quiet cluster): the scenario's verdict still judges it, with what the
    stream delivered, and says how far that was."""
    w = _watcher()
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))
    w._binds[0].at -= 60.0  # past the catch-up deadline (views.CATCH_UP_S)
    found = w.since(0.0, {"ns"}, set())
    assert [(v.what, v.identity) for v in found] == [("bound-early", "ns/a")]
    assert "delivered only up to revision 10" in str(found[0])


def test_a_scenario_verdict_waits_for_the_claim_stream_to_reach_a_recent_bind() -> None:
    w = _watcher()
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))

    def late() -> None:
        time.sleep(0.3)
        w.record.feed("claim", "MODIFIED", _claim("c", 19, "d0", {"x/ready": "True"}))
        w.record.feed("claim", "ADDED", _claim("other", 21, None))

    feeder = threading.Thread(target=late)
    feeder.start()
    found = w.since(0.0, {"ns"}, set())
    feeder.join()
    assert not found and not w._binds


def _listing(*claims: tuple[str, int]) -> Any:
    """A stand-in cluster (a fake, said so) whose quorum list of the namespace's claims answers `claims`."""
    items = [SimpleNamespace(metadata=SimpleNamespace(name=n, resource_version=str(rv))) for n, rv in claims]
    return SimpleNamespace(
        resource=SimpleNamespace(list_namespaced_resource_claim=lambda ns: SimpleNamespace(items=items))
    )


def test_a_quiet_claim_stream_is_no_wait_once_the_apiserver_lists_the_claims_as_recorded() -> None:
    """A scenario alone: no claim written after the bind. The list says the claim is at the revision recorded (10):
    nothing is in flight, the bind is judged at once, a real bound-early caught without the lag note."""
    w = _watcher()
    w.record.cluster = _listing(("c", 10))  # type: ignore[assignment]
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))
    started = time.monotonic()
    found = w.since(0.0, {"ns"}, set())
    assert time.monotonic() - started < 2.0
    assert [(v.what, v.identity) for v in found] == [("bound-early", "ns/a")] and "only up to" not in str(found[0])
    w = _watcher()
    w.record.cluster = _listing(("c", 19))  # type: ignore[assignment]  # ready at 19: still in flight, waited for
    _event(w, "claim", "ADDED", _claim("c", 10, "d0"))
    _event(w, "pod", "MODIFIED", _pod("a", 20, "node-0", "c"))
    w._check_binds(final=False, current=frozenset())
    assert not w.violations and len(w._binds) == 1


def test_two_claims_holding_one_physical_device_is_a_violation_at_once() -> None:
    slices = [_slice(("d0", "U0"), ("d0-copy", "U0"))]
    claims = [_claim("c1", 1, "d0"), _claim("c2", 2, "d0-copy")]
    w = _watcher(slices, claims)
    w._check_devices()
    assert [(v.what, v.identity) for v in w.violations] == [("held-twice", "U0")]


def test_one_entry_in_two_claims_is_the_schedulers_fault_not_held_twice() -> None:
    """Only the allocator writes allocations: one entry in two claims says nothing about the implementation."""
    slices = [_slice(("d0", "U0"), ("d0-copy", "U0"))]
    w = _watcher(slices, [_claim("c1", 1, "d0"), _claim("c2", 2, "d0")])
    w._check_devices()
    assert [(v.what, v.identity, v.objects) for v in w.violations] == [("allocated-twice", "U0", ("ns/c1", "ns/c2"))]
    w = _watcher(slices, [_claim("c1", 1, "d0"), _claim("c2", 2, "d0"), _claim("c3", 3, "d0-copy")])
    w._check_devices()
    assert sorted(v.what for v in w.violations) == ["allocated-twice", "held-twice"], "both faults at once"


def test_offered_twice_counts_only_when_it_persists() -> None:
    w = _watcher([_slice(("d0", "U0"), ("hot", "U0"))])
    w._check_devices()
    assert not w.violations, "a first sighting may be stream skew"
    w._suspects = {k: time.monotonic() - 5 for k in w._suspects}
    w._check_devices()
    assert [(v.what, v.identity) for v in w.violations] == [("offered-twice", "U0")]


def test_a_failed_allocation_does_not_count_as_holding() -> None:
    slices = [_slice(("d0", "U0"), ("hot", "U0"))]
    claims = [_claim("c1", 1, "d0", {"x/failed": "True"}), _claim("c2", 2, "hot")]
    w = _watcher(slices, claims)
    w._check_devices()
    assert not w.violations


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = _slice(("d0", "U0"))
    new = _slice(("d0-moved", "U0"))
    old["spec"]["pool"]["generation"], new["spec"]["pool"]["generation"] = 1, 2
    w = _watcher([old, new])
    w._check_devices()
    w._suspects = {k: time.monotonic() - 5 for k in w._suspects}
    w._check_devices()
    assert not w.violations, "a device moving between the slices of a pool being rewritten is offered once"


def _counted_watcher(entries: int, free: int) -> InvariantWatcher:
    devs = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": "gpu"}}, "bindingConditions": ["x/ready"]}
        for i in range(entries)
    ]
    pool = {"name": "f0", "generation": 1, "resourceSliceCount": 1}
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    spec = {"driver": DRIVER, "pool": pool, "nodeSelector": selector, "devices": devs}
    w = _watcher([{"metadata": {"name": "s"}, "spec": spec}])
    node = {"metadata": {"name": "n1"}, "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    w.record.feed("node", "ADDED", node)
    free_counts = ({"fabric": "f0", "model": "gpu", "free": free, "total": 4, "nodes": ["n1"]},)
    w.record.add_sample(Sample(0.0, 0.01, {}, free_counts))  # the newest fabric probe answer
    w.model_attribute = "model"
    return w


def test_count_entries_offered_above_the_fabrics_free_count_is_a_violation_when_it_persists() -> None:
    w = _counted_watcher(entries=3, free=2)
    w._check_devices()
    assert not w.violations, "a first sight may be stream skew"
    w._suspects = {k: v - 2 for k, v in w._suspects.items()}  # as if seen 2 s ago
    w._check_devices()
    assert [(v.what, v.identity) for v in w.violations] == [("offered-above-free", "f0/gpu")]
    fine = _counted_watcher(entries=2, free=2)
    fine._check_devices()
    fine._suspects = {k: v - 2 for k, v in fine._suspects.items()}
    fine._check_devices()
    assert not fine.violations


def test_a_count_pool_may_withhold_a_device_whose_attach_failed_and_no_other() -> None:
    w = _counted_watcher(entries=2, free=3)
    assert w.counted_complete("f0", "gpu")[0] is False, "one free device not offered, none failed: not complete"
    w.record.add_sample(Sample(1.0, 1.01, {"F": ("n1", "attaching")}, ()))
    w.record.add_sample(Sample(1.2, 1.21, {}, ()))  # F's attach failed: it may be withheld (IMP-4)
    w.record.add_sample(
        Sample(1.4, 1.41, {}, ({"fabric": "f0", "model": "gpu", "free": 3, "total": 4, "nodes": ["n1"]},))
    )
    complete, said = w.counted_complete("f0", "gpu")
    assert complete and "after a failed attach" in said
    w.record.add_sample(
        Sample(1.6, 1.61, {}, ({"fabric": "f0", "model": "gpu", "free": 4, "total": 4, "nodes": ["n1"]},))
    )
    assert w.counted_complete("f0", "gpu")[0] is False, "two short with one failed device: one more is withheld"


def test_a_copy_left_on_a_node_counts_free_or_held_but_not_tainted() -> None:
    """An exclusive node lease waits for copies_on() to be empty: a copy held by a claim that is going away is free
    a moment later, so it counts; a tainted one cannot be allocated, so it does not."""
    here = _slice(("hot-0", "U0"), ("hot-1", "U1"), ("hot-2", "U2"))
    here["spec"]["nodeName"] = "node-3"
    here["spec"]["devices"][2]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    there = _slice(("hot-9", "U9"))
    there["spec"]["nodeName"] = "node-2"
    w = _watcher([here, there], [_claim("c1", 1, "hot-0")])
    assert sorted(w.copies_on("node-3")) == sorted(f"{here['metadata']['name']}:hot-{i}" for i in (0, 1))
    assert w.copies_on("node-1") == []


def test_free_entries_of_a_device_on_one_node() -> None:
    """A count-based let-go judges the scenario's node: a copy of the same physical device offered on another node
    (another scenario attached it there after the detach) is not this scenario's leftover."""
    here = _slice(("hot-0", "U0"))
    here["spec"]["nodeName"] = "node-2"
    there = _slice(("hot-0", "U0"))
    there["spec"]["nodeName"] = "node-6"
    w = _watcher([here, there])
    assert sorted(w.free_entries("U0")) == sorted(
        [f"{here['metadata']['name']}:hot-0", f"{there['metadata']['name']}:hot-0"]
    )
    assert w.free_entries("U0", "node-6") == [f"{there['metadata']['name']}:hot-0"]
    assert w.free_entries("U0", "node-3") == []


def test_in_offer_ignores_the_claim_holding_the_device_but_not_a_taint_nor_the_reach() -> None:
    """IMP-8's failure path: a failed device still held by its own claim is out of offer only once it is hidden (a
    taint, or removed, or its selector narrowed away from the node); its allocation does not hide it."""
    fabric = _slice(("fabric-0", "U0"), ("fabric-1", "U1"))
    fabric["spec"]["allNodes"] = True
    fabric["spec"]["devices"][1]["taints"] = [{"key": "quarantine", "effect": "NoSchedule"}]
    elsewhere = _slice(("hot-0", "U0"))
    elsewhere["spec"]["nodeName"] = "node-6"
    w = _watcher([fabric, elsewhere], [_claim("c1", 1, "fabric-0")])
    assert w.in_offer("U0", "node-2") == [f"{fabric['metadata']['name']}:fabric-0"], "held, not hidden: in offer"
    assert w.free_entries("U0") == [f"{elsewhere['metadata']['name']}:hot-0"], "its held entry is not free"
    assert w.in_offer("U1", "node-2") == [], "tainted: out of offer"
