"""Unit tests of the attachment rules (IMP-10..12) on a hand-fed record (a fake: no watches, no probe endpoint;
what is tested is the judgement of moments, which the suite's runs exercise against a real fabric manager)."""

from __future__ import annotations

from typing import Any

from conformance.observe.attachments import Judge, attaches
from conformance.observe.recorder import ANY_DEVICE, Record, Recorder, Sample
from conformance.observe.summaries import slice_summary

DRIVER = "gpu.example.com"
T0 = 1000.0


def _claim(rv: int, node: str, ready: bool, uuid_data: str | None = None, device: str = "d0") -> dict[str, Any]:
    result = {"driver": DRIVER, "pool": "fabric", "device": device, "request": "r"}
    result |= {"bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/failed"]}
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    entry: dict[str, Any] = {"driver": DRIVER, "pool": "fabric", "device": device}
    entry["conditions"] = [{"type": "x/ready", "status": "True" if ready else "False"}]
    if uuid_data:
        entry["data"] = {"uuid": uuid_data}
    return {
        "metadata": {"name": "c", "namespace": "ns", "resourceVersion": str(rv)},
        "status": {
            "allocation": {"allocationTimestamp": "t", "devices": {"results": [result]}, "nodeSelector": selector},
            "devices": [entry],
        },
    }


def _pod(rv: int, node: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(rv)},
        "spec": {"nodeName": node},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]},
    }


def _record(
    events: list[tuple[float, str, str, dict[str, Any]]], probe: list[tuple[float, dict[str, Any]]]
) -> Recorder:
    """events: (time, kind, type, object); probe: (sent time, states) answered 10 ms later."""
    rec = Recorder(None, "r", "uuid")
    fabric = {
        "metadata": {"name": "fabric", "resourceVersion": "1"},
        "spec": {"driver": DRIVER, "pool": {"name": "fabric", "generation": 1}, "allNodes": True, "devices": []},
    }
    fabric["spec"]["devices"] = [{"name": "d0", "attributes": {"uuid": {"string": "U0"}}}]
    rec.records.append(Record(0, T0 - 10, "slice", "ADDED", "", "fabric", 1, slice_summary(fabric, "uuid")))
    for at, kind, type_, obj in events:
        meta = obj["metadata"]
        rev = int(meta["resourceVersion"])
        rec.records.append(Record(len(rec.records), at, kind, type_, meta["namespace"], meta["name"], rev, obj))
    for sent, states in probe:
        rec.add_sample(Sample(sent, sent + 0.01, states))
    return rec


def _probe(until: float, attached: tuple[float, float], node: str = "n1", state: str = "attached") -> list:
    """A sample every 0.1 s from T0 to `until`; U0 listed on `node` from attached[0] to attached[1]."""
    out, t = [], T0
    while t < until:
        listed = attached[0] <= t < attached[1]
        out.append((t, {"U0": (node, state)} if listed else {}))
        t = round(t + 0.1, 3)
    return out


def _judge(rec: Recorder, detach_s: float = 5.0) -> dict[str, list[str]]:
    return Judge(DRIVER, "uuid", detach_s).judge(rec).violations


def _life(detached_at: float, condition_at: float = T0 + 2.0) -> Recorder:
    """Allocated at +1, condition True at `condition_at`, pod bound at +3, pod gone at +10, claim gone at +11."""
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (condition_at, "claim", "MODIFIED", _claim(11, "n1", True)),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
        (T0 + 10, "pod", "DELETED", _pod(13, "n1")),
        (T0 + 11, "claim", "DELETED", _claim(14, "n1", True)),
    ]
    return _record(events, _probe(T0 + 20, (T0 + 1.5, detached_at)))


def test_the_reference_life_of_a_device_breaks_no_rule() -> None:
    assert _judge(_life(detached_at=T0 + 12)) == {}


def test_a_device_detached_while_its_pod_runs_breaks_imp10_and_imp11() -> None:
    found = _judge(_life(detached_at=T0 + 6))
    assert set(found) == {"IMP-10", "IMP-11"}
    assert "pod ns/p bound on n1" in found["IMP-10"][0] and "says free" in found["IMP-10"][0]


def _deleting_pod(rv: int) -> dict[str, Any]:
    pod = _pod(rv, "n1")
    pod["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    return pod


def test_a_claim_the_control_plane_released_ends_the_use_of_a_pod_still_being_deleted() -> None:
    """Seen on 1.35 (SCALE-1): the pod lingered with a deletionTimestamp, kube-controller-manager deallocated its
    claim, the implementation detached: correct. A detach before the release, or of a pod not being deleted, is not."""
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 2, "claim", "MODIFIED", _claim(11, "n1", True)),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
        (T0 + 8, "pod", "MODIFIED", _deleting_pod(13)),
        (T0 + 9, "claim", "DELETED", _claim(14, "n1", True)),
    ]
    assert _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 10)))) == {}
    assert "IMP-10" in _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 7))))
    running = [e for e in events if e[3]["metadata"].get("deletionTimestamp") is None]
    assert "IMP-10" in _judge(_record(running, _probe(T0 + 20, (T0 + 1.5, T0 + 10))))


def test_a_deleted_node_ends_the_use_of_its_pod_for_imp10() -> None:
    """IMP-16: a stack may detach from a node that is gone before the pod garbage collector removes the pod (40-80 s
    later); IMP-10 asks for the attachment only until the node's deletion. A detach before it still breaks IMP-10."""
    node = {"metadata": {"name": "n1", "namespace": "", "resourceVersion": "13"}}
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 2, "claim", "MODIFIED", _claim(11, "n1", True)),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
        (T0 + 6, "node", "DELETED", node),
        (T0 + 10, "pod", "DELETED", _pod(14, "n1")),
        (T0 + 11, "claim", "DELETED", _claim(15, "n1", True)),
    ]
    assert "IMP-10" not in _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 7))))
    assert "IMP-10" in _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 4.5))))


def test_the_end_of_a_use_is_read_with_the_streams_lag_and_by_revision() -> None:
    """A pod's deletion (or its node's, or its claim's release) is known as its stream delivered it: the fabric may
    answer detaching before the suite's pod stream delivers the deletion (soak load: hundreds of ms), so answers up to
    SKEW_S before the delivered end are not the pod's. The release counts as the end when it came after the deletion
    began by revision, whichever stream delivered first."""
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 2, "claim", "MODIFIED", _claim(11, "n1", True)),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
        (T0 + 10, "pod", "DELETED", _pod(14, "n1")),
        (T0 + 11, "claim", "DELETED", _claim(15, "n1", True)),
    ]
    assert "IMP-10" not in _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 9.4))))  # 0.6 s lag
    assert "IMP-10" in _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 8.5))))  # 1.5 s early: wrong
    # deletion begun at revision 13 (delivered at T0+6.002), claim released at 14 (delivered at T0+6.0, first);
    # the pod object lingers until T0+30: the release at T0+6 ends the use
    deleting = _pod(13, "n1") | {"metadata": {**_pod(13, "n1")["metadata"], "deletionTimestamp": "now"}}
    lingering = [
        *events[:3],
        (T0 + 6.0, "claim", "MODIFIED", {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "14"}}),
        (T0 + 6.002, "pod", "MODIFIED", deleting),
        (T0 + 30, "pod", "DELETED", _pod(16, "n1")),
    ]
    assert "IMP-10" not in _judge(_record(lingering, _probe(T0 + 40, (T0 + 1.5, T0 + 7))))


def test_an_allocation_pinned_to_another_node_is_not_the_one_the_pod_bound_with() -> None:
    """Seen on reschedule-to-local under load: the claim stream recorded the reallocation after the bind; the fabric
    allocation on n2 (attached there) is not judged against the pod on n1."""
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n2", True)),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
        (T0 + 3.2, "claim", "DELETED", _claim(13, "n2", True)),
    ]
    found = _judge(_record(events, _probe(T0 + 8, (T0 + 1.5, T0 + 6), node="n2")))
    assert "IMP-10" not in found, found


def test_an_allocation_cleared_before_the_bind_is_not_the_one_the_pod_bound_with_late_stream_or_not() -> None:
    """Seen on reference-counted under load: the fabric allocation (same node, bindsToNode) was cleared at a revision
    before the pod's bind, the claim stream delivered that clearing after the pod stream delivered the bind, and the
    device, by then another claim's, was detached while the pod ran on its node-local copy: no IMP-10 violation of
    this pod. A clearing at a revision after the bind still ends a holding the pod bound with."""
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 3, "pod", "MODIFIED", _pod(13, "n1")),  # bound at revision 13, seen at +3
        (T0 + 4, "claim", "MODIFIED", {**_claim(12, "n1", False), "status": {}}),  # cleared at 12, seen at +4
        (T0 + 10, "pod", "DELETED", _pod(14, "n1")),
    ]
    assert "IMP-10" not in _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 5))))
    after = [*events[:2], (T0 + 4, "claim", "MODIFIED", {**_claim(15, "n1", False), "status": {}}), events[3]]
    assert "IMP-10" in _judge(_record(after, _probe(T0 + 20, (T0 + 1.5, T0 + 3.5))))


def test_a_condition_true_while_the_attach_is_in_flight_breaks_imp11() -> None:
    rec = _life(detached_at=T0 + 12, condition_at=T0 + 1.2)  # the probe lists U0 only from +1.5
    assert set(_judge(rec)) == {"IMP-11"}


def test_an_attachment_kept_past_detach_seconds_breaks_imp12() -> None:
    found = _judge(_life(detached_at=T0 + 19), detach_s=5.0)
    assert set(found) == {"IMP-12"}
    assert "last holder was released" in found["IMP-12"][0]


def test_a_detach_the_suite_held_back_counts_out_of_detach_seconds() -> None:
    """IMP-8 holds a released device's detach across a restart: the stack's deadline runs without that hold."""
    held = _life(detached_at=T0 + 19)  # released at +11, detached at +19: 3 s late for detachSeconds 5
    held.hold_back("U0", T0 + 12, T0 + 16)  # the suite refused its detach for 4 of those
    assert _judge(held, detach_s=5.0) == {}
    short = _life(detached_at=T0 + 19)
    short.hold_back("U0", T0 + 12, T0 + 13)  # 1 s held: still 2 s late
    found = _judge(short, detach_s=5.0)
    assert set(found) == {"IMP-12"} and "1.0s of it held back by the suite" in found["IMP-12"][0], found
    assert held.held_between("U0", T0, T0 + 14) == 2.0 and held.held_between("U1", T0, T0 + 20) == 0.0


def test_a_restart_of_the_stack_by_the_suite_counts_out_of_every_devices_detach_seconds_once() -> None:
    """While the suite restarts a process of the stack (IMP-8, device-lifecycle), nothing of it can act: the window
    counts out of every device's detachSeconds (ANY_DEVICE), overlapping holds counted once; a restart that is over
    before the release, or comes after the deadline, gives nothing."""
    down = _life(detached_at=T0 + 19)  # released at +11: 3 s late for detachSeconds 5
    down.hold_back(ANY_DEVICE, T0 + 12, T0 + 15)
    down.hold_back("U0", T0 + 13, T0 + 16)  # overlaps the restart: 4 s held in all, not 6
    assert _judge(down, detach_s=5.0) == {}
    assert down.held_between("U0", T0, T0 + 20) == 4.0 and down.held_between("U1", T0, T0 + 20) == 3.0
    early = _life(detached_at=T0 + 19)
    early.hold_back(ANY_DEVICE, T0 + 5, T0 + 10)  # before the release
    assert set(_judge(early, detach_s=5.0)) == {"IMP-12"}
    late = _life(detached_at=T0 + 19)
    late.hold_back(ANY_DEVICE, T0 + 30, T0 + 40)  # after the detach: no allowance for what came later
    assert set(_judge(late, detach_s=5.0)) == {"IMP-12"}


def test_a_claim_released_before_ready_must_let_go_too() -> None:
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 2, "claim", "DELETED", _claim(11, "n1", False)),
    ]
    assert set(_judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 20))))) == {"IMP-12"}
    assert _judge(_record(events, _probe(T0 + 20, (T0 + 1.5, T0 + 4)))) == {}


def test_a_counted_entry_is_identified_from_its_status_data() -> None:
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False, device="fake-gpu-7")),
        (T0 + 2, "claim", "MODIFIED", _claim(11, "n1", True, uuid_data="U0", device="fake-gpu-7")),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
    ]
    rec = _record(events, _probe(T0 + 8, (T0 + 1.5, T0 + 6)))
    found = _judge(rec)
    assert set(found) == {"IMP-10", "IMP-11"}, found


def _resched(rv: int, name: str, on: bool) -> dict[str, Any]:
    claim = _claim(rv, "n1", False)
    claim["metadata"]["name"] = name
    claim["status"]["devices"][0]["conditions"].append({"type": "x/resched", "status": "True" if on else "False"})
    return claim


def test_a_condition_meaning_reschedule_says_attached_unless_another_claim_holds_the_device() -> None:
    judge = Judge(DRIVER, "uuid", 5.0, reschedule=frozenset({"x/resched"}))
    early = [
        (T0 + 1, "claim", "ADDED", _resched(10, "c", False)),
        (T0 + 2, "claim", "MODIFIED", _resched(11, "c", True)),
    ]
    probe = _probe(T0 + 4, (T0 + 3, T0 + 4))  # attaching only from +3: the reschedule at +2 came first
    assert set(judge.judge(_record(early, probe)).violations) == {"IMP-11"}
    held = [(T0 + 0.5, "claim", "ADDED", _resched(9, "winner", False)), *early]  # the winner holds U0 meanwhile
    assert "IMP-11" not in judge.judge(_record(held, probe)).violations


def _attach_then_attached(attach_ends: float, detached: float, until: float = T0 + 20) -> list:
    """U0 attaching on n1 from +1.5 until `attach_ends`, then attached until `detached`, then gone."""
    out, t = [], T0
    while t < until:
        state = "attaching" if T0 + 1.5 <= t < attach_ends else "attached" if attach_ends <= t < detached else None
        out.append((t, {"U0": ("n1", state)} if state else {}))
        t = round(t + 0.1, 3)
    return out


def test_detach_seconds_count_from_the_end_of_an_attach_in_flight_at_the_release() -> None:
    """A claim released at +2 while its (slowed) attach runs until +8: the device cannot be detached before +8, so
    detachSeconds (5) starts there: let go at +12.5 is in time, at +14 is not."""
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 2, "claim", "DELETED", _claim(11, "n1", False)),
    ]
    assert _judge(_record(events, _attach_then_attached(T0 + 8, T0 + 12.5))) == {}
    found = _judge(_record(events, _attach_then_attached(T0 + 8, T0 + 14)))
    assert set(found) == {"IMP-12"} and "its attach in flight then ended at" in found["IMP-12"][0], found


def test_an_attach_that_never_ends_gets_no_allowance() -> None:
    events = [
        (T0 + 1, "claim", "ADDED", _claim(10, "n1", False)),
        (T0 + 2, "claim", "DELETED", _claim(11, "n1", False)),
    ]
    assert set(_judge(_record(events, _attach_then_attached(T0 + 30, T0 + 30)))) == {"IMP-12"}


def _two_device_claim(rv: int, ready: tuple[bool, bool]) -> dict[str, Any]:
    """One claim of two devices (two requests): d0 (U0) and d1 (U1), each with its own condition."""
    claim = _claim(rv, "n1", ready[0])
    second = {**claim["status"]["allocation"]["devices"]["results"][0], "device": "d1", "request": "r2"}
    claim["status"]["allocation"]["devices"]["results"].append(second)
    entry = {"driver": DRIVER, "pool": "fabric", "device": "d1"}
    entry["conditions"] = [{"type": "x/ready", "status": "True" if ready[1] else "False"}]
    claim["status"]["devices"].append(entry)
    return claim


def test_every_device_of_a_multi_device_claim_is_judged_not_only_the_first() -> None:
    """IMP-10/11 read each allocated device of a claim: the second device of two, reported with the first while its
    own attach was still to come (the per-device bookkeeping of --broken-report-all-on-first), is named."""
    events = [
        (T0 + 1, "claim", "ADDED", _two_device_claim(10, (False, False))),
        (T0 + 2, "claim", "MODIFIED", _two_device_claim(11, (True, True))),
        (T0 + 3, "pod", "MODIFIED", _pod(12, "n1")),
        (T0 + 10, "pod", "DELETED", _pod(13, "n1")),
        (T0 + 11, "claim", "DELETED", _two_device_claim(14, (True, True))),
    ]
    probe = []
    for sent, states in _probe(T0 + 20, (T0 + 1.5, T0 + 12)):
        states = dict(states)
        if T0 + 4 <= sent < T0 + 12:  # U1's attach ends after both were reported and the pod bound
            states["U1"] = ("n1", "attached")
        probe.append((sent, states))
    rec = _record(events, probe)
    d1 = {"name": "d1", "attributes": {"uuid": {"string": "U1"}}}
    fabric = rec.records[0].obj
    rec.records[0] = Record(0, T0 - 10, "slice", "ADDED", "", "fabric", 1, {**fabric, "devices": [*fabric["devices"]]})
    rec.records[0].obj["devices"].append(slice_summary(_slice_of(d1), "uuid")["devices"][0])
    found = _judge(rec)
    assert set(found) == {"IMP-10", "IMP-11"}, found
    assert all("U1" in v and "U0" not in v for v in found["IMP-10"] + found["IMP-11"]), found


def _slice_of(device: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "fabric", "resourceVersion": "1"},
        "spec": {"driver": DRIVER, "pool": {"name": "fabric", "generation": 1}, "allNodes": True, "devices": [device]},
    }


def test_attaches_counts_the_attaches_the_probe_saw_begin() -> None:
    """Free -> attaching -> attached is one attach; a detach and a second attach to the node count again."""
    rec = _record([], [])
    answers = [(T0, {}), (T0 + 1, {"U0": ("n1", "attaching")}), (T0 + 2, {"U0": ("n1", "attached")})]
    answers += [(T0 + 4, {}), (T0 + 5, {"U0": ("n1", "attached")})]
    for sent, states in answers:
        rec.add_sample(Sample(sent, sent + 0.01, states))
    records = rec.select(("probe",))
    assert attaches(records, {"U0"}, "n1", T0, T0 + 3) == 1
    assert attaches(records, {"U0"}, "n2", T0, T0 + 3) == 0
    assert attaches(records, {"U0"}, "n1", T0, T0 + 6) == 2
