"""What the record says happened to a scenario's claims (observe/story.py), the line a failed wait's message leads
with: allocations and what cleared them, conditions never written, who wrote status.devices. Hand-made watch events
fed to a real Recorder (a fake of the API, said so here); the words are what is tested."""

from __future__ import annotations

from claim_events import NS, READY, T0, claim, record_of

from conformance.observe.story import lead, stories


def test_allocations_each_cleared_by_the_binding_timeout_with_the_condition_never_written() -> None:
    events = []
    for i in range(3):
        start = T0 + 30 * i
        events += [(start + 0.1, claim(10 * i + 1, start)), (start + 20.4, claim(10 * i + 2, None))]
    told = stories(record_of(events), [NS], 20)
    assert lead(told) == (
        f"claim {NS}/app-gpu-1 allocated 3 times on n1, each cleared by the binding timeout after 20.4 s; binding "
        f"condition {READY} never written; status.devices written by nobody"
    )


def test_a_condition_written_false_and_who_wrote_it_are_said() -> None:
    written = [{"type": READY, "status": "False", "reason": "Attaching"}]
    events = [(T0 + 0.1, claim(1, T0)), (T0 + 3, claim(2, T0, conditions=written))]
    (told,) = stories(record_of(events), [NS], 20)
    assert told.text() == (
        f"claim {NS}/app-gpu-1 allocated once on n1; {READY} written False (Attaching), never True; "
        "status.devices last written by reference-controller at 00:41:07 UTC"
    )


def test_a_failure_condition_and_an_early_clearing_are_not_called_the_binding_timeout() -> None:
    failed = [{"type": "FabricDeviceFailed", "status": "True", "reason": "AttachFailed"}]
    events = [(T0 + 0.1, claim(1, T0)), (T0 + 2, claim(2, T0, conditions=failed)), (T0 + 2.5, claim(3, None))]
    events += [(T0 + 3, claim(4, T0 + 3)), (T0 + 8, claim(5, None))]
    (told,) = stories(record_of(events), [NS], 20)
    assert "binding timeout" not in told.text()
    assert told.ends == [
        "cleared after FabricDeviceFailed=True (AttachFailed) at 2.5 s",
        "cleared after 5.0 s with no failure condition True",
    ]


def test_a_claim_never_allocated_says_why_its_pod_was_not_scheduled() -> None:
    record = record_of([(T0, claim(1, None))])
    pod = {
        "metadata": {"name": "app", "namespace": NS, "resourceVersion": "2"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/8 nodes fit"}
            ]
        },
    }
    record.feed("pod", "ADDED", pod)
    assert lead(stories(record, [NS], 20)) == (
        f"claim {NS}/app-gpu-1 never allocated: pod app: Unschedulable: 0/8 nodes fit"
    )


def test_a_claim_bound_with_every_condition_true_is_no_lead() -> None:
    ready = [{"type": READY, "status": "True"}]
    events = [(T0 + 0.1, claim(1, T0)), (T0 + 3, claim(2, T0, conditions=ready))]
    told = stories(record_of(events), [NS], 20)
    assert lead(told) == "" and not told[0].troubled


def test_the_last_allocation_still_standing_is_said_apart() -> None:
    events = []
    for i in range(4):
        start = T0 + 30 * i
        events.append((start + 0.1, claim(10 * i + 1, start)))
        if i < 3:
            events.append((start + 22.0, claim(10 * i + 2, None)))
    told = lead(stories(record_of(events), [NS], 20))
    assert told.startswith(
        f"claim {NS}/app-gpu-1 allocated 4 times on n1, the first 3 cleared by the binding timeout after 22.0 s, "
        "the last still allocated; "
    )
