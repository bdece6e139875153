"""The run-wide record's bookkeeping, fed by hand (stand-ins for the watch streams and the fabric probe; no
cluster): relists do not repeat records, node heartbeats are not changes, the probe records each change only,
the live view follows deletions, and slice summaries carry each device's identity."""

from __future__ import annotations

import threading

from json_server import serving

from conformance.observe.recorder import Recorder, Sample


def _recorder() -> Recorder:
    return Recorder(cluster=None, run_id="r", attribute="uuid")  # type: ignore[arg-type]  # streams never started


def _obj(name: str, rv: int, ns: str = "ns", **extra: object) -> dict:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv)}, **extra}


def test_relists_do_not_repeat_records_and_deletions_leave_the_live_view() -> None:
    rec = _recorder()
    on_claim = rec._on("claim")
    on_claim("ADDED", _obj("c", 5))
    on_claim("SYNC", _obj("c", 5))  # a relist after a watch ended repeats the object
    on_claim("MODIFIED", _obj("c", 7))
    assert [(r.type, r.revision) for r in rec.select(("claim",))] == [("ADDED", 5), ("MODIFIED", 7)]
    assert len(rec.live("claim")) == 1
    on_claim("DELETED", _obj("c", 8))
    assert rec.live("claim") == [] and rec.select(("claim",))[-1].type == "DELETED"


def test_node_heartbeats_are_not_recorded_but_changes_are() -> None:
    rec = _recorder()
    on_node = rec._on("node")
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {}}
    on_node("ADDED", _obj("node-0", 1, ns="", **ready))
    on_node("MODIFIED", _obj("node-0", 2, ns="", **ready))  # heartbeat: same summary
    on_node("MODIFIED", _obj("node-0", 3, ns="", status={"conditions": [{"type": "Ready", "status": "False"}]}))
    assert [r.obj["ready"] for r in rec.select(("node",))] == ["True", "False"]


def test_slice_summaries_keep_identities_for_the_timelines() -> None:
    rec = _recorder()
    spec = {
        "driver": "d",
        "pool": {"name": "fabric-0", "generation": 2},
        "allNodes": True,
        "devices": [{"name": "gpu-1", "attributes": {"uuid": {"string": "u-1"}}}, {"name": "gpu-2"}],
    }
    rec._on("slice")("ADDED", _obj("s", 3, ns="", spec=spec))
    assert rec.identities() == {("fabric-0", "gpu-1"): "u-1"}
    assert rec.select(("slice",))[0].obj["where"] == "allNodes"


def test_the_probe_records_each_change_once() -> None:
    states = [
        [],
        [{"device": "u-1", "node": "node-1", "state": "attaching"}],
        [{"device": "u-1", "node": "node-1", "state": "attaching"}],
        [{"device": "u-1", "node": "node-1", "state": "attached"}],
        [],
    ]
    served = {"n": 0}
    done = threading.Event()

    def answer(_request: object) -> dict[str, object]:
        body = states[min(served["n"], len(states) - 1)]
        served["n"] += 1
        if served["n"] > len(states) + 2:
            done.set()
        return {"attachments": body}

    rec = _recorder()
    with serving(answer) as port:
        rec.probe(f"http://127.0.0.1:{port}/v1/attachments")
        assert done.wait(10)
        rec._stop.set()
    changes = [(r.obj["state"], r.obj["previous"]) for r in rec.select(("probe",))]
    assert changes == [("attaching", []), ("attached", ["node-1", "attaching"]), ("free", ["node-1", "attached"])]
    stats = rec.stats()["probe"]
    assert stats["periodSeconds"] <= 0.2 and stats["samples"] >= len(states)


def test_probe_answers_are_kept_in_order_of_sending_and_read_by_moment() -> None:
    rec = _recorder()
    rec.add_sample(Sample(10.0, 10.05, {}))
    rec.add_sample(Sample(10.2, 10.25, {"U0": ("n1", "attached")}))
    rec.add_sample(Sample(10.1, 10.3, {"U0": ("n1", "attaching")}))  # sent before the previous one, back after it
    assert [s.sent for s in rec.samples()] == [10.0, 10.1, 10.2]
    assert rec.after(10.05) == {"U0": ("n1", "attaching")}, "the first answer SENT at or after the moment"
    assert rec.after(10.15) == {"U0": ("n1", "attached")}
    rec.add_sample(Sample(10.3, 10.35, {"U0": ("n1", "attached")}))
    assert rec.latest() == (10.2, {"U0": ("n1", "attached")}, []), "the newest answer, from when it first showed"


def _changes(rec: Recorder) -> list[tuple[float, str, str, list[str]]]:
    return [(r.at, r.name, r.obj["state"], r.obj["previous"]) for r in rec.select(("probe",))]


def test_an_answer_back_after_a_later_one_records_no_change_twice() -> None:
    """Three answers in flight: the later one came back first and recorded the attach against the answer before both;
    the earlier one, showing the same state, adds nothing (soak 2026-12-07 22:19: COST-2 counted two attaches)."""
    rec = _recorder()
    rec.add_sample(Sample(10.0, 10.05, {}))
    rec.add_sample(Sample(10.2, 10.25, {"U0": ("n1", "attaching")}))
    rec.add_sample(Sample(10.1, 10.3, {"U0": ("n1", "attaching")}))
    assert _changes(rec) == [(10.2, "U0", "attaching", [])]


def test_an_answer_back_late_with_a_state_between_records_the_way_there_and_back() -> None:
    rec = _recorder()
    rec.add_sample(Sample(10.0, 10.05, {}))
    rec.add_sample(Sample(10.2, 10.25, {}))  # the attach failed between the answers: no change against 10.0
    rec.add_sample(Sample(10.1, 10.3, {"F": ("n1", "attaching")}))
    assert _changes(rec) == [(10.1, "F", "attaching", []), (10.2, "F", "free", ["n1", "attaching"])]
    assert rec.failed_attaches() == {"F": ("n1", None)}


def test_a_device_free_again_without_ever_being_attached_counts_as_a_failed_attach() -> None:
    rec = _recorder()
    rec.add_sample(Sample(1.0, 1.01, {}))
    rec.add_sample(Sample(1.2, 1.21, {"F": ("n1", "attaching"), "X": ("n1", "attaching")}))
    rec.add_sample(Sample(1.4, 1.41, {"X": ("n1", "attached")}))  # F: attaching, then free: the attach failed
    rec.add_sample(Sample(1.6, 1.61, {"X": ("n1", "detaching")}))
    rec.add_sample(Sample(1.8, 1.81, {}))  # X: detached, no failure
    assert rec.failed_attaches() == {"F": ("n1", None)}
    rec.add_sample(Sample(2.0, 2.01, {"F": ("n2", "attaching")}))
    assert rec.failed_attaches() == {}, "attached again (or trying): no longer a failed, free device"


def test_an_unchanged_probe_answer_shares_the_one_before_it() -> None:
    """`make scale` holds 1000 attachments for minutes: ten answers a second must not each keep their own copy."""
    rec = Recorder(None, "run")
    rec.add_sample(Sample(1.0, 1.01, {"U0": ("n1", "attached")}))
    rec.add_sample(Sample(1.1, 1.11, {"U0": ("n1", "attached")}))
    rec.add_sample(Sample(1.2, 1.21, {"U0": ("n1", "detaching")}))
    first, same, changed = rec.samples()
    assert same.states is first.states and (same.sent, same.received) == (1.1, 1.11)
    assert changed.states == {"U0": ("n1", "detaching")}
    assert [r.obj["state"] for r in rec.select(("probe",))] == ["attached", "detaching"]


def test_a_changed_probe_answer_keeps_the_unchanged_entries_of_the_one_before() -> None:
    rec = Recorder(None, "run")
    rec.add_sample(Sample(1.0, 1.01, {"U0": ("n1", "attached"), "U1": ("n2", "attaching")}))
    rec.add_sample(Sample(1.1, 1.11, {"U0": ("n1", "attached"), "U1": ("n2", "attached")}))
    first, second = rec.samples()
    assert second.states == {"U0": ("n1", "attached"), "U1": ("n2", "attached")}
    assert second.states["U0"] is first.states["U0"] and second.states["U1"] is not first.states["U1"]
    assert [r.obj["state"] for r in rec.select(("probe",))] == ["attached", "attaching", "attached"]


def test_claims_and_pods_are_recorded_with_their_managers_but_not_the_fields_they_own() -> None:
    """Only the names of the status fields a manager owns stay (who wrote status.devices: observe/story.py)."""
    rec = _recorder()
    devices = {"f:devices": {"k:{}": {"f:conditions": {}}}, "f:allocation": {"f:devices": {}}}
    managed = [
        {"manager": "kube-scheduler", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {}}}},
        {"manager": "controller", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": devices}},
    ]
    claim = _obj("c", 5)
    claim["metadata"]["managedFields"] = managed
    rec.feed("claim", "ADDED", claim)
    (record,) = rec.select(("claim",))
    assert record.obj["metadata"]["managedFields"] == [
        {"manager": "kube-scheduler", "operation": "Update"},
        {
            "manager": "controller",
            "operation": "Update",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:devices": {}, "f:allocation": {}}},
        },
    ]


def test_the_high_water_is_what_a_stream_delivered_in_order_not_a_lists_objects() -> None:
    """A watch delivers in revision order; a list does not (its end, `progressed`, says how far it got)."""
    rec = _recorder()
    rec.feed("claim", "SYNC", _obj("a", 9))
    assert rec.high_water("claim") == 0, "a relist's objects come in no revision order"
    rec.progressed("claim", 12)  # the list's revision
    rec.feed("claim", "MODIFIED", _obj("a", 15))
    rec.feed("claim", "SYNC", _obj("b", 16))
    rec.progressed("claim", 14)  # an older bookmark moves nothing back
    assert rec.high_water("claim") == 15 and rec.high_water("pod") == 0
