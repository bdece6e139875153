"""The deliberately broken modes (hidden --broken-* flags, for the conformance suite's selftests): each one must
really break the one requirement it names, and only when asked for. Decisions and the reconciler with fakes."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from test_decide import DRIVER, KEEP, LOCAL, NOW, claim, claim_obj, conditions, dev, plan_for, rule
from test_reconciler import FakeKube, reconciler

from fake_drivers.controller.cli import BROKEN_FLAGS, BROKEN_VALUES, main
from fake_drivers.controller.decide import (
    BROKEN_HIDE_AFTER_S,
    BROKEN_NOTICE_AFTER_S,
    BROKEN_QUARANTINE_AFTER_S,
    Failure,
    Memory,
    Snapshot,
    _available,
    decide,
)
from fake_drivers.controller.model import Claim, NodeCopy
from fake_drivers.controller.roles import Role
from fake_drivers.controller.settings import FabricEntries, Mode, Purpose, Settings

FAILED = Memory(failures={"uuid-fabric-0-0": Failure("FabricLinkDown", "link 3 lost")})


def test_every_broken_mode_is_off_by_default_and_is_a_hidden_flag_warned_about_at_start() -> None:
    assert Settings().broken_modes() == []
    for flag in BROKEN_FLAGS:
        field = flag.removeprefix("--").replace("-", "_")
        assert replace(Settings(), **{field: True}).broken_modes() == [flag]
    for flag in BROKEN_VALUES:
        field = flag.removeprefix("--").replace("-", "_")
        assert replace(Settings(), **{field: "/tmp/x"}).broken_modes() == [flag]
    hidden = {o.opts[0] for o in main.params if getattr(o, "hidden", False)}
    assert hidden == set(BROKEN_FLAGS) | set(BROKEN_VALUES)
    assert not any(flag in main.get_help(click.Context(main)) for flag in [*BROKEN_FLAGS, *BROKEN_VALUES])


# --- IMP-4: the failed device is offered again ----------------------------------------------------------------


def test_offer_failed_device_reports_the_failure_but_no_quarantine_so_the_device_is_attached_again() -> None:
    broken = replace(KEEP, broken_offer_failed_device=True)
    r, kube, fabric = reconciler(broken, [dev(0)], [claim_obj()])
    r._failures["uuid-fabric-0-0"] = Failure("FabricLinkDown", "link lost")
    plan = r.reconcile_once()
    assert ("create_taint", "quarantine") not in kube.calls, "broken mode must not hide the failed device"
    assert ("write_condition", "attach-failed") in kube.calls, "the failure is still reported"
    assert "fabric-0-gpu-0" in [d.name for d in plan.pools["fabric-0"]], "still listed in the pool"
    # The scheduler reallocates the claim (no conditions yet) to the same, unhidden device: it is attached again.
    r.caches.claims.objects[:] = [claim_obj(name="c2")]  # type: ignore[union-attr]
    r.reconcile_once()
    assert fabric.done.wait(5) and fabric.ops == [("attach", "uuid-fabric-0-0")]


def test_late_quarantine_reports_the_failure_at_once_but_hides_the_device_only_seconds_later() -> None:
    failed = Memory(failures={"uuid-fabric-0-0": Failure("FabricLinkDown", "link 3 lost", NOW)})
    normal = plan_for(KEEP, [dev(0)], memory=failed)
    assert [t.purpose for t in normal.create_taints] == [Purpose.QUARANTINE], "the correct controller hides it now"
    broken = replace(KEEP, broken_late_quarantine=True)
    assert plan_for(broken, [dev(0)], memory=failed).create_taints == [], "broken: not hidden yet"
    later = plan_for(broken, [dev(0)], memory=failed, now=NOW + BROKEN_QUARANTINE_AFTER_S)
    assert [t.purpose for t in later.create_taints] == [Purpose.QUARANTINE], "hidden in the end"


def test_report_before_hiding_tells_the_claim_first_and_hides_the_device_a_second_later() -> None:
    """The order clause of IMP-4: the correct controller hides the device in the same pass, before the write."""
    failed = Memory(failures={"uuid-fabric-0-0": Failure("FabricLinkDown", "link 3 lost", NOW)})
    held = (claim(),)
    normal = plan_for(KEEP, [dev(0)], held, memory=failed)
    assert [t.purpose for t in normal.create_taints] == [Purpose.QUARANTINE]
    assert conditions(normal) == [("attach-failed", "FabricLinkDown")]
    broken = replace(KEEP, broken_report_before_hiding=True)
    first = plan_for(broken, [dev(0)], held, memory=failed)
    assert first.create_taints == [] and conditions(first) == [("attach-failed", "FabricLinkDown")], "told, not hidden"
    later = plan_for(broken, [dev(0)], held, memory=failed, now=NOW + BROKEN_HIDE_AFTER_S)
    assert [t.purpose for t in later.create_taints] == [Purpose.QUARANTINE], "hidden a second later"


def test_reassign_failed_device_gives_the_failed_counted_device_to_the_next_entry() -> None:
    counted = Settings(driver=DRIVER, mode=Mode.RESCHEDULE_TO_LOCAL, fabric_entries=FabricEntries.COUNTED)
    snap = Snapshot((dev(0), dev(1)), (), (), (rule(Purpose.QUARANTINE, dev(0)),))
    taints = {(t.purpose, t.uuid): t for t in snap.taints}
    memory = Memory(failures={"uuid-fabric-0-0": Failure("FabricLinkDown", "link 3 lost", NOW)})
    for taints_, memory_ in ((taints, Memory()), ({}, memory)):
        ok = _available(counted, snap, {}, taints_, memory_)[("fabric-0", "gpu")]
        assert [d.name for d in ok] == ["fabric-0-gpu-1"], "the correct controller skips the failed device"
        broken = _available(replace(counted, broken_reassign_failed_device=True), snap, {}, taints_, memory_)
        assert broken[("fabric-0", "gpu")][0].name == "fabric-0-gpu-0", "broken: the failed device first again"


# --- IMP-5: never detached --------------------------------------------------------------------------------------


def test_never_detach_keeps_a_released_device_attached_and_out_of_a_reschedule_to_local_pool() -> None:
    device = dev(0, "attached", "node-0")
    idle = Memory(idle_since={device.uuid: NOW - 3600})
    normal = plan_for(KEEP, [device], taints=(rule(Purpose.DETACH, device),), memory=idle)
    assert [d.uuid for d in normal.detaches] == [device.uuid], "the correct controller detaches it"
    for settings in (KEEP, LOCAL):
        broken = replace(settings, broken_never_detach=True)
        plan = plan_for(broken, [device], memory=idle)
        assert plan.detaches == [] and plan.create_taints == []
        guarded = plan_for(broken, [device], taints=(rule(Purpose.DETACH, device),), memory=idle)
        assert guarded.detaches == []
    assert plan_for(replace(LOCAL, broken_never_detach=True), [device], memory=idle).pools["fabric-0"] == []


# --- SCH-5 / IMP-4: no failure condition ------------------------------------------------------------------------


def test_no_failure_condition_leaves_the_claim_pending_after_an_attach_failure() -> None:
    broken = replace(KEEP, broken_no_failure_condition=True)
    plan = plan_for(broken, [dev(0)], (claim(),), memory=FAILED)
    assert plan.conditions == [] and plan.attaches == []
    assert [t.purpose for t in plan.create_taints] == [Purpose.QUARANTINE]
    quarantine = rule(Purpose.QUARANTINE, dev(0), until=NOW + 60, reason="FabricLinkDown")
    assert conditions(plan_for(broken, [dev(0)], (claim(),), taints=(quarantine,))) == []
    assert conditions(plan_for(KEEP, [dev(0)], (claim(),), memory=FAILED)) == [("attach-failed", "FabricLinkDown")]


# --- IMP-8: forgotten across a restart --------------------------------------------------------------------------


def test_forget_on_restart_never_reports_an_attach_found_in_flight_at_start() -> None:
    broken = replace(KEEP, broken_forget_on_restart=True)
    r, kube, fabric = reconciler(broken, [dev(0, "attaching", "node-0"), dev(1)], [claim_obj()])
    r.reconcile_once()  # the first pass after the (re)start
    fabric.devices_[0] = dev(0, "attached", "node-0")  # the attach completes
    r.reconcile_once()
    r.reconcile_once()
    assert ("write_condition", "attached") not in kube.calls, "the attach found at start must never be reported"
    assert fabric.ops == []
    # A claim allocated after the start is served as usual: only what was in flight at start is forgotten.
    r.caches.claims.objects.append(claim_obj(name="c2", device="fabric-0-gpu-1"))  # type: ignore[union-attr]
    r.reconcile_once()
    assert fabric.done.wait(5) and fabric.ops == [("attach", "uuid-fabric-0-1")]
    correct, kube2, _ = reconciler(KEEP, [dev(0, "attached", "node-0")], [claim_obj()])
    correct.reconcile_once()
    assert ("write_condition", "attached") in kube2.calls


def test_forget_unsent_on_restart_drops_the_attach_and_the_detach_decided_but_not_sent_at_start() -> None:
    broken = replace(KEEP, broken_forget_unsent_on_restart=True, idle_grace_s=0.0, taint_settle_s=0.0)
    # An allocated claim whose device is still free (attach decided, not sent); an idle device nobody holds (detach
    # due).
    devices = [dev(0), dev(1, "attached", "node-0")]
    r, kube, fabric = reconciler(broken, devices, [claim_obj()])
    for _ in range(3):
        r.reconcile_once()
    assert fabric.ops == [], "the work found decided but unsent at start must be lost"
    assert ("create_taint", "detach") not in kube.calls, "the idle device's detach (its guard first) must be lost"
    # A claim allocated after the start is served as usual.
    r.caches.claims.objects.append(claim_obj(name="c2", device="fabric-0-gpu-2"))  # type: ignore[union-attr]
    fabric.devices_.append(dev(2))
    r.reconcile_once()
    assert fabric.done.wait(5) and fabric.ops == [("attach", "uuid-fabric-0-2")]
    correct, kube2, fabric2 = reconciler(replace(KEEP, idle_grace_s=0.0, taint_settle_s=0.0), devices, [claim_obj()])
    correct.reconcile_once()
    assert fabric2.done.wait(5) and ("attach", "uuid-fabric-0-0") in fabric2.ops
    assert ("create_taint", "detach") in kube2.calls


def test_forget_move_on_restart_never_moves_a_device_found_attached_to_another_node() -> None:
    broken = replace(KEEP, broken_forget_move_on_restart=True)
    moving = [dev(0, "attached", "node-1")]  # the claim's allocation is on node-0
    r, _, fabric = reconciler(broken, moving, [claim_obj()])
    for _ in range(3):
        r.reconcile_once()
    assert fabric.ops == [], "the move found at start must be lost"
    correct, _, fabric2 = reconciler(KEEP, moving, [claim_obj()])
    correct.reconcile_once()
    assert fabric2.done.wait(5) and fabric2.ops == [("detach", "uuid-fabric-0-0")]


def _rule(purpose: Purpose, uuid: str, since: float = 0.0) -> dict[str, Any]:
    """A DeviceTaintRule of the reference controller as the API returns it (purpose and device in its labels)."""
    labels = {"fake-drivers.example.com/purpose": purpose.value, "fake-drivers.example.com/device-uuid": uuid}
    notes = {"reference-controller.fake-drivers.example.com/since": str(since)}
    name = KEEP.taint_rule_name(purpose, uuid)
    return {"metadata": {"name": name, "labels": labels, "annotations": notes}}


def test_forget_detach_on_restart_never_detaches_a_guarded_device_nor_offers_a_detached_one_again() -> None:
    fast = replace(KEEP, idle_grace_s=0.0, taint_settle_s=0.0)
    broken = replace(fast, broken_forget_detach_on_restart=True)
    devices = [dev(0, "attached", "node-0"), dev(1)]  # guarded and still attached; guarded and detached already
    r, kube, fabric = reconciler(broken, devices, [], FakeKube(fresh_claims=[]))
    r.caches.taints.objects.extend([_rule(Purpose.DETACH, d.uuid) for d in devices])  # type: ignore[union-attr]
    for _ in range(3):
        r.reconcile_once()
    assert fabric.ops == [], "the detach found begun at start must never be sent"
    assert not [c for c in kube.calls if c[0] == "delete_taint"], "the detached device's guard must never be lifted"
    correct, kube2, fabric2 = reconciler(fast, devices, [], FakeKube(fresh_claims=[]))
    correct.caches.taints.objects.extend([_rule(Purpose.DETACH, d.uuid) for d in devices])  # type: ignore[union-attr]
    correct.reconcile_once()
    assert fabric2.done.wait(5) and fabric2.ops == [("detach", devices[0].uuid)]
    assert ("delete_taint", KEEP.taint_rule_name(Purpose.DETACH, devices[1].uuid)) in kube2.calls


def test_reoffer_failed_on_restart_deletes_the_quarantine_and_forgets_the_failure() -> None:
    broken = replace(KEEP, broken_reoffer_failed_on_restart=True)
    quarantined = _rule(Purpose.QUARANTINE, dev(0).uuid)
    until = str(time.time() + 600)  # the quarantine still lasts
    quarantined["metadata"]["annotations"]["reference-controller.fake-drivers.example.com/until"] = until
    r, kube, _ = reconciler(broken, [dev(0)], [claim_obj()])
    r.caches.taints.objects.append(quarantined)  # type: ignore[union-attr]
    r.reconcile_once()
    assert ("delete_taint", quarantined["metadata"]["name"]) in kube.calls, "the quarantine found at start goes"
    assert ("write_condition", "attach-failed") not in kube.calls, "and the failure it records is forgotten"
    correct, kube2, fabric2 = reconciler(KEEP, [dev(0)], [claim_obj()])
    correct.caches.taints.objects.append(quarantined)  # type: ignore[union-attr]
    correct.reconcile_once()
    assert ("write_condition", "attach-failed") in kube2.calls and fabric2.ops == []
    assert not [c for c in kube2.calls if c[0] == "delete_taint"]


def test_reoffer_failed_on_restart_in_the_condition_writer_never_reports_a_failure_found_recorded_at_start() -> None:
    """The roles split (reference-roles.yaml): the condition writer's share of the broken mode is the report. A rule
    found at its start is never reported, pass after pass; a failure recorded after its start is (that rule, not the
    device, is forgotten). The correct condition writer reports the first at once."""
    broken = replace(KEEP, broken_reoffer_failed_on_restart=True)
    quarantined = _rule(Purpose.QUARANTINE, dev(0).uuid, since=100.0)
    notes = quarantined["metadata"]["annotations"]
    notes["reference-controller.fake-drivers.example.com/until"] = str(time.time() + 600)
    r, kube, fabric = reconciler(broken, [dev(0)], [claim_obj()])
    r.role = Role.CONDITIONS
    r.caches.taints.objects.append(quarantined)  # type: ignore[union-attr]
    for _ in range(3):
        r.reconcile_once()
    assert ("write_condition", "attach-failed") not in kube.calls, "the failure found recorded at start is forgotten"
    assert not [c for c in kube.calls if c[0] == "delete_taint"] and fabric.ops == [], "not the condition writer's"
    notes["reference-controller.fake-drivers.example.com/since"] = "200.0"
    r.reconcile_once()  # the device failed again after the restart: a rule of its own
    assert ("write_condition", "attach-failed") in kube.calls
    correct, kube2, _ = reconciler(KEEP, [dev(0)], [claim_obj()])
    correct.role = Role.CONDITIONS
    notes["reference-controller.fake-drivers.example.com/since"] = "100.0"
    correct.caches.taints.objects.append(quarantined)  # type: ignore[union-attr]
    correct.reconcile_once()
    assert ("write_condition", "attach-failed") in kube2.calls


def test_attachment_records_attach_again_at_restart_a_free_device_once_attached(tmp_path: Path) -> None:
    records = tmp_path / "records.json"
    broken = replace(KEEP, broken_attachment_records=str(records))
    r, _, fabric = reconciler(broken, [dev(0)], [claim_obj()])
    r.reconcile_once()
    assert fabric.done.wait(5) and fabric.ops == [("attach", dev(0).uuid)]
    deadline = time.time() + 5
    while not (records.exists() and "node-0" in records.read_text()) and time.time() < deadline:
        time.sleep(0.05)  # the worker records the attach once the fabric answered
    restarted, _, fabric2 = reconciler(broken, [dev(0)], [])  # released, detached, offered again; then a restart
    restarted.reconcile_once()
    assert fabric2.done.wait(5) and fabric2.ops == [("attach", dev(0).uuid)], "the stale record attaches it again"
    correct, _, fabric3 = reconciler(KEEP, [dev(0)], [])
    correct.reconcile_once()
    assert fabric3.ops == []


def test_stale_attached_reports_a_device_once_attached_to_its_next_claim_without_attaching_it() -> None:
    """Reuse (IMP-28): attached once is not attached now, nor on another node."""
    broken = replace(KEEP, broken_stale_attached=True)
    r, kube, fabric = reconciler(broken, [dev(0, "attached", "node-1")], [])  # an earlier use, on node-1
    r.reconcile_once()
    fabric.devices_[0] = dev(0)  # detached since; now a claim on node-0 holds it
    r.caches.claims.objects.append(claim_obj())  # type: ignore[union-attr]
    r.reconcile_once()
    assert ("write_condition", "attached") in kube.calls and fabric.ops == [], "reported without an attach"
    correct, kube2, fabric2 = reconciler(KEEP, [dev(0)], [claim_obj()])
    correct.reconcile_once()
    assert ("write_condition", "attached") not in kube2.calls
    assert fabric2.done.wait(5) and fabric2.ops == [("attach", dev(0).uuid)]


# --- IMP-10..12: the fabric's truth ----------------------------------------------------------------------------


def test_detach_while_used_detaches_a_ready_device_a_second_after_it_was_first_seen_ready() -> None:
    broken = replace(KEEP, broken_detach_while_used=True)
    device = dev(0, "attached", "node-0")
    ready = (claim(conditions={f"{DRIVER}/attached": "True"}),)
    first = plan_for(broken, [device], ready)
    assert first.detaches == [], "not at once: the pod binds first"
    later = plan_for(broken, [device], ready, memory=Memory(idle_since=first.idle_since), now=NOW + 1.5)
    assert [d.uuid for d in later.detaches] == [device.uuid]
    assert plan_for(KEEP, [device], ready, memory=Memory(idle_since=first.idle_since), now=NOW + 1.5).detaches == []


def test_detach_on_claim_delete_detaches_the_device_of_a_claim_being_deleted_while_its_pod_runs() -> None:
    device = dev(0, "attached", "node-0")
    obj = claim_obj(conditions={f"{DRIVER}/attached": "True"})
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"  # kept by its finalizer: the pod still runs
    deleting = (Claim.from_api(obj),)
    assert plan_for(KEEP, [device], deleting).detaches == [], "the correct controller waits for the pod"
    broken = plan_for(replace(KEEP, broken_detach_on_claim_delete=True), [device], deleting)
    assert [d.uuid for d in broken.detaches] == [device.uuid]


def test_report_while_attaching_writes_attached_as_soon_as_the_attach_is_in_flight() -> None:
    broken = replace(KEEP, broken_report_while_attaching=True)
    busy = Memory(inflight={"uuid-fabric-0-0": "attach"})
    first = plan_for(broken, [dev(0, "attaching", "node-0")], (claim(),), memory=busy)
    assert conditions(first) == [("attached", "BrokenOnPurpose")]  # the first pass that sees it in flight
    assert conditions(plan_for(KEEP, [dev(0, "attaching", "node-0")], (claim(),), memory=busy)) == []


def test_keep_unready_attach_never_detaches_a_device_whose_claim_went_away_before_ready() -> None:
    broken = replace(KEEP, broken_keep_unready_attach=True)
    held = plan_for(
        broken, [dev(0, "attaching", "node-0")], (claim(),), memory=Memory(inflight={"uuid-fabric-0-0": "attach"})
    )
    memory = Memory(idle_since={**held.idle_since, "uuid-fabric-0-0": NOW - 3600})
    device = dev(0, "attached", "node-0")
    plan = plan_for(broken, [device], taints=(rule(Purpose.DETACH, device),), memory=memory)
    assert plan.detaches == [] and plan.create_taints == []
    assert [d.uuid for d in plan_for(KEEP, [device], taints=(rule(Purpose.DETACH, device),), memory=memory).detaches]


def test_keep_on_deleted_node_never_detaches_a_device_left_on_a_deleted_node() -> None:
    broken = replace(KEEP, broken_keep_on_deleted_node=True)
    device = dev(0, "attached", "node-gone")
    guard = rule(Purpose.DETACH, device)
    memory = Memory(idle_since={device.uuid: NOW - 3600})
    plan = decide(broken, Snapshot((device,), (), (), (guard,), frozenset({"node-0"})), memory, NOW)
    assert plan.detaches == [] and plan.create_taints == []
    assert decide(KEEP, Snapshot((device,), (), (), (guard,), frozenset({"node-0"})), memory, NOW).detaches
    on_a_live_node = dev(0, "attached", "node-0")
    live = Snapshot((on_a_live_node,), (), (), (guard,), frozenset({"node-0"}))
    assert decide(broken, live, memory, NOW).detaches, "a device on a node that exists is detached as usual"


# --- IMP-17: another driver's claim stops every pass -----------------------------------------------------------


def test_abort_on_other_driver_stops_every_pass_once_it_met_another_drivers_claim() -> None:
    import pytest

    from fake_drivers.controller.reconciler import ForeignClaim

    other = claim_obj(name="other", driver="other.example.com", pool="fabric")
    r, _, fabric = reconciler(KEEP, [dev(0)], [other, claim_obj()])
    r.reconcile_once()  # the correct controller ignores the other driver's claim and attaches its own
    assert fabric.done.wait(5) and fabric.ops == [("attach", "uuid-fabric-0-0")]
    broken, _, fabric = reconciler(replace(KEEP, broken_abort_on_other_driver=True), [dev(0)], [other, claim_obj()])
    with pytest.raises(ForeignClaim, match=r"pool fabric of driver other\.example\.com is not one of ours"):
        broken.reconcile_once()
    broken.caches.claims.objects[:] = [claim_obj()]  # type: ignore[union-attr]
    with pytest.raises(ForeignClaim):  # the other claim is gone: the controller stays stopped
        broken.reconcile_once()
    assert fabric.ops == []
    unconditioned = claim_obj(name="plain", driver="other.example.com", binding=False)
    quiet, _, _ = reconciler(replace(KEEP, broken_abort_on_other_driver=True), [dev(0)], [unconditioned])
    quiet.reconcile_once()  # without binding conditions another driver's claim does not stop it


def test_abort_pass_on_other_driver_aborts_each_pass_that_meets_one_and_recovers() -> None:
    import pytest

    from fake_drivers.controller.reconciler import ForeignClaim

    other = claim_obj(name="other", driver="sch-1.conformance.example.com", pool="a-fabric")
    broken, _, fabric = reconciler(
        replace(KEEP, broken_abort_pass_on_other_driver=True), [dev(0)], [other, claim_obj()]
    )
    with pytest.raises(
        ForeignClaim, match=r"pool a-fabric of driver sch-1\S+ is not one of ours; aborting this reconcile"
    ):
        broken.reconcile_once()
    assert fabric.ops == [], "nothing done in an aborted pass"
    broken.caches.claims.objects[:] = [claim_obj()]  # type: ignore[union-attr]
    broken.reconcile_once()  # the other claim is gone: the next pass works, its own claim is attached
    assert fabric.done.wait(5) and fabric.ops == [("attach", "uuid-fabric-0-0")]


# --- COST-1/COST-2: needless detours ---------------------------------------------------------------------------


def test_early_reschedule_asks_before_the_node_local_copy_exists_the_correct_controller_waits() -> None:
    attached = dev(0, "attached", "node-0")
    assert conditions(plan_for(LOCAL, [attached], (claim(),))) == [], "correct: waits for the node-local copy"
    broken = replace(LOCAL, broken_early_reschedule=True)
    assert conditions(plan_for(broken, [attached], (claim(),))) == [("reschedule", "BrokenOnPurpose")]
    assert conditions(plan_for(broken, [dev(0, "attaching", "node-0")], (claim(),))) == [], "never before the attach"


def test_needless_reattach_detaches_an_attached_device_once_then_attaches_it_again_and_reports() -> None:
    broken = replace(KEEP, broken_needless_reattach=True)
    attached = dev(0, "attached", "node-0")
    assert conditions(plan_for(KEEP, [attached], (claim(),))) == [("attached", "Attached")], "correct: reported"
    first = plan_for(broken, [attached], (claim(),))
    assert [d.uuid for d in first.detaches] == [attached.uuid] and first.conditions == []
    remembered = Memory(idle_since=first.idle_since)
    again = plan_for(broken, [dev(0)], (claim(),), memory=remembered)  # detached: attached again
    assert [a.uuid for a in again.attaches] == [attached.uuid]
    done = plan_for(broken, [attached], (claim(),), memory=Memory(idle_since=again.idle_since))
    assert done.detaches == [] and conditions(done) == [("attached", "Attached")]


def test_no_hold_offers_the_node_local_copy_and_asks_for_the_reschedule_only_seconds_later() -> None:
    fresh = plan_for(LOCAL, [dev(0)], (claim(),))
    assert [t.purpose for t in fresh.create_taints] == [Purpose.HOLD], "the correct controller holds the copy"
    broken = replace(LOCAL, broken_no_hold=True)
    unheld = plan_for(broken, [dev(0)], (claim(),))
    assert unheld.create_taints == [] and [a.needs_hold for a in unheld.attaches] == [False], "broken: no hold"
    device = dev(0, "attached", "node-0")
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    first = plan_for(broken, [device], (claim(),), copies=(copy,))
    assert first.conditions == [], "broken: the copy is not noticed at once"
    later = plan_for(
        broken,
        [device],
        (claim(),),
        copies=(copy,),
        memory=Memory(idle_since=first.idle_since),
        now=NOW + BROKEN_NOTICE_AFTER_S,
    )
    assert conditions(later) == [("reschedule", "NodeLocalCopyPublished")]
    assert conditions(plan_for(LOCAL, [device], (claim(),), copies=(copy,))) == [
        ("reschedule", "NodeLocalCopyPublished")
    ]
