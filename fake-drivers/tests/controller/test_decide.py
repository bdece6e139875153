"""The reconcile decisions as pure functions: snapshot in, plan out, no API and no fabric."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from fake_drivers.controller.decide import Failure, Memory, Snapshot, decide
from fake_drivers.controller.model import Claim, FabricDevice, NodeCopy, TaintRule, allocation_node
from fake_drivers.controller.objects import pool_slices, still_applies, with_condition
from fake_drivers.controller.settings import FabricEntries, Mode, Purpose, Settings

DRIVER = "gpu.example.com"
KEEP = Settings(driver=DRIVER, idle_grace_s=10, taint_settle_s=1, quarantine_s=60)
LOCAL = Settings(driver=DRIVER, mode=Mode.RESCHEDULE_TO_LOCAL, idle_grace_s=10, taint_settle_s=1)
NOW = 1_000_000.0


def dev(index: int = 0, state: str = "free", node: str | None = None, fabric: str = "fabric-0") -> FabricDevice:
    return FabricDevice(
        f"uuid-{fabric}-{index}", f"{fabric}-gpu-{index}", fabric, "gpu", {"memoryGiB": 80}, state, node
    )


def claim_obj(
    device: str = "fabric-0-gpu-0",
    pool: str = "fabric-0",
    node: str | None = "node-0",
    conditions: dict[str, str] | None = None,
    name: str = "c1",
    driver: str = DRIVER,
    binding: bool = True,
) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "dev", "driver": driver, "pool": pool, "device": device}
    if binding:
        result["bindingConditions"] = [f"{driver}/attached"]
        result["bindingFailureConditions"] = [f"{driver}/attach-failed", f"{driver}/reschedule"]
    allocation: dict[str, Any] = {"devices": {"results": [result]}, "allocationTimestamp": "2026-01-01T00:00:00Z"}
    if node:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
    status: dict[str, Any] = {"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "p"}]}
    if conditions:
        status["devices"] = [
            {
                "driver": driver,
                "pool": pool,
                "device": device,
                "conditions": [
                    {
                        "type": t,
                        "status": s,
                        "reason": "R",
                        "message": "m",
                        "lastTransitionTime": "2026-01-01T00:00:01Z",
                    }
                    for t, s in conditions.items()
                ],
            }
        ]
    meta = {"namespace": "ns", "name": name, "uid": f"uid-{name}", "generation": 1, "resourceVersion": "7"}
    return {"metadata": meta, "spec": {}, "status": status}


def claim(**kwargs: Any) -> Claim:
    return Claim.from_api(claim_obj(**kwargs))


def rule(
    purpose: Purpose,
    device: FabricDevice,
    since: float = NOW - 100,
    until: float | None = None,
    reason: str | None = None,
) -> TaintRule:
    return TaintRule(KEEP.taint_rule_name(purpose, device.uuid), purpose, device.uuid, since, until, reason, "msg")


def plan_for(
    settings: Settings,
    devices: list[FabricDevice],
    claims: tuple[Claim, ...] = (),
    copies: tuple[NodeCopy, ...] = (),
    taints: tuple[TaintRule, ...] = (),
    memory: Memory | None = None,
    now: float = NOW,
):  # type: ignore[no-untyped-def]
    return decide(settings, Snapshot(tuple(devices), claims, copies, taints), memory or Memory(), now)


def conditions(plan) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(w.type.split("/")[1], w.reason) for w in plan.conditions]


# --- fabric pool ------------------------------------------------------------------------------------------


def test_pool_slices_carry_binding_fields_node_selector_and_identity() -> None:
    [body] = pool_slices(KEEP, "fabric-0", [dev(1), dev(0)], generation=3)
    spec = body["spec"]
    assert spec["pool"] == {"name": "fabric-0", "generation": 3, "resourceSliceCount": 1}
    assert spec["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": KEEP.node_label, "operator": "In", "values": ["fabric-0"]}]}
        ]
    }
    assert "nodeName" not in spec and "allNodes" not in spec
    first = spec["devices"][0]
    assert [d["name"] for d in spec["devices"]] == ["fabric-0-gpu-0", "fabric-0-gpu-1"]
    assert first["bindsToNode"] is True
    assert first["bindingConditions"] == [f"{DRIVER}/attached"]
    assert first["bindingFailureConditions"] == [f"{DRIVER}/attach-failed", f"{DRIVER}/reschedule"]
    assert first["attributes"]["uuid"] == {"string": "uuid-fabric-0-0"}
    assert first["attributes"]["model"] == {"string": "gpu"}
    assert first["attributes"]["memoryGiB"] == {"int": 80}


def test_keep_in_pool_lists_every_device_reschedule_to_local_only_free_ones() -> None:
    devices = [dev(0), dev(1, "attached", "node-0"), dev(2, "attaching", "node-2"), dev(0, fabric="fabric-1")]
    keep = plan_for(KEEP, devices)
    local = plan_for(LOCAL, devices)
    assert [d.name for d in keep.pools["fabric-0"]] == ["fabric-0-gpu-0", "fabric-0-gpu-1", "fabric-0-gpu-2"]
    assert [d.name for d in local.pools["fabric-0"]] == ["fabric-0-gpu-0"]
    assert [d.name for d in local.pools["fabric-1"]] == ["fabric-1-gpu-0"]


def test_reschedule_to_local_lists_a_detached_device_only_once_its_guard_has_been_gone_a_while() -> None:
    """kube-scheduler's ResourceSlice tracker panics when a rule is deleted while a slice listing its device grows
    (docs/upstream/scheduler-panic-in-resourceslice-tracker.md): the guard goes while the device is listed nowhere,
    the device is listed taint_settle_s later (a pass of the poll); keep-in-pool lists it throughout."""
    device = dev(0)
    guard = rule(Purpose.DETACH, device)
    lifting = plan_for(LOCAL, [device], taints=(guard,))
    assert lifting.delete_taints == [guard.name] and lifting.pools["fabric-0"] == []
    assert lifting.idle_since == {f"offer:{device.uuid}": NOW}
    settling = plan_for(LOCAL, [device], memory=Memory(idle_since={f"offer:{device.uuid}": NOW - 0.5}))
    assert settling.pools["fabric-0"] == [] and settling.idle_since == {f"offer:{device.uuid}": NOW - 0.5}
    offered = plan_for(LOCAL, [device], memory=Memory(idle_since={f"offer:{device.uuid}": NOW - 1}))
    assert offered.pools["fabric-0"] == [device] and offered.idle_since == {}
    assert plan_for(KEEP, [device], taints=(guard,)).pools["fabric-0"] == [device]
    others = plan_for(LOCAL, [device, dev(1)], taints=(guard,))
    assert [d.name for d in others.pools["fabric-0"]] == ["fabric-0-gpu-1"], "only the device whose rule goes"


# --- attach before bind -----------------------------------------------------------------------------------


def test_claim_on_a_free_device_is_attached_to_the_allocated_node_and_nothing_is_reported_yet() -> None:
    plan = plan_for(KEEP, [dev(0)], (claim(node="node-2"),))
    assert [(a.uuid, a.node) for a in plan.attaches] == [("uuid-fabric-0-0", "node-2")]
    assert plan.conditions == []


@pytest.mark.parametrize(
    ("state", "node", "expect"),
    [
        ("attaching", "node-0", "wait"),
        ("attached", "node-2", "detach"),  # attached elsewhere (an earlier holder): move it first
        ("detaching", "node-2", "wait"),
        ("attached", "node-0", "attached"),
    ],
)
def test_the_binding_condition_is_set_only_when_the_fabric_says_attached_to_that_node(
    state: str, node: str, expect: str
) -> None:
    plan = plan_for(KEEP, [dev(0, state, node)], (claim(node="node-0"),))
    assert conditions(plan) == ([("attached", "Attached")] if expect == "attached" else [])
    assert plan.attaches == []
    assert [d.node for d in plan.detaches] == (["node-2"] if expect == "detach" else [])


def test_an_operation_in_flight_is_not_started_twice() -> None:
    plan = plan_for(KEEP, [dev(0)], (claim(),), memory=Memory(inflight={"uuid-fabric-0-0": "attach"}))
    assert plan.attaches == [] and plan.conditions == []


def test_ready_and_failed_claims_are_left_alone() -> None:
    ready = claim(conditions={f"{DRIVER}/attached": "True"})
    failed = claim(name="c2", device="fabric-0-gpu-1", conditions={f"{DRIVER}/attach-failed": "True"})
    plan = plan_for(KEEP, [dev(0, "attached", "node-0"), dev(1)], (ready, failed))
    assert plan.conditions == [] and plan.attaches == [] and plan.detaches == []


def test_other_drivers_and_allocations_without_binding_conditions_are_ignored() -> None:
    other = claim(driver="other.example.com")
    plain = claim(name="c2", device="fabric-0-gpu-1", binding=False)
    plan = plan_for(KEEP, [dev(0), dev(1)], (other, plain))
    assert plan.attaches == [] and plan.conditions == []


def test_node_comes_from_the_allocation_node_selector() -> None:
    assert claim(node="node-3").node == "node-3"
    two = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}
    assert allocation_node({"nodeSelector": two}) is None
    plan = plan_for(KEEP, [dev(0)], (claim(node=None),))
    assert conditions(plan) == [("attach-failed", "NoSingleNode")] and plan.attaches == []


# --- failure ------------------------------------------------------------------------------------------------


def test_a_failed_attach_quarantines_the_device_and_reports_the_fabric_reason() -> None:
    memory = Memory(failures={"uuid-fabric-0-0": Failure("FabricLinkDown", "link 3 lost")})
    plan = plan_for(KEEP, [dev(0)], (claim(),), memory=memory)
    [taint] = plan.create_taints
    assert (taint.purpose, taint.reason, taint.until) == (Purpose.QUARANTINE, "FabricLinkDown", NOW + 60)
    [write] = plan.conditions
    assert (write.type, write.reason, write.message) == (f"{DRIVER}/attach-failed", "FabricLinkDown", "link 3 lost")
    assert plan.attaches == []


def test_quarantine_rule_carries_the_failure_across_a_restart_and_ends_when_it_expires() -> None:
    device = dev(0)
    quarantine = rule(Purpose.QUARANTINE, device, until=NOW + 5, reason="FabricLinkDown")
    plan = plan_for(KEEP, [device], (claim(),), taints=(quarantine,))
    assert conditions(plan) == [("attach-failed", "FabricLinkDown")] and plan.attaches == []
    expired = plan_for(KEEP, [device], taints=(quarantine,), now=NOW + 6)
    assert expired.delete_taints == [quarantine.name]


# --- detach on release ----------------------------------------------------------------------------------------


def test_an_idle_device_is_hidden_then_rechecked_then_detached_then_offered_again() -> None:
    device = dev(0, "attached", "node-0")
    within = plan_for(KEEP, [device], memory=Memory(idle_since={device.uuid: NOW - 5}))
    assert within.create_taints == [] and within.detaches == []
    assert within.idle_since == {device.uuid: NOW - 5}
    hide = plan_for(KEEP, [device], memory=Memory(idle_since={device.uuid: NOW - 10}))
    assert [(t.purpose, t.uuid) for t in hide.create_taints] == [(Purpose.DETACH, device.uuid)]
    assert hide.detaches == []
    settling = plan_for(
        KEEP,
        [device],
        taints=(rule(Purpose.DETACH, device, since=NOW - 0.5),),
        memory=Memory(idle_since={device.uuid: NOW - 20}),
    )
    assert settling.detaches == []
    guard = rule(Purpose.DETACH, device, since=NOW - 1)
    go = plan_for(KEEP, [device], taints=(guard,), memory=Memory(idle_since={device.uuid: NOW - 20}))
    assert [(d.uuid, d.node, d.recheck) for d in go.detaches] == [(device.uuid, "node-0", True)]
    detaching = plan_for(KEEP, [dev(0, "detaching", "node-0")], taints=(guard,))
    assert detaching.delete_taints == [] and detaching.detaches == []
    copy_left = NodeCopy("node-0", "node-0", device.name, device.uuid)
    assert plan_for(KEEP, [dev(0)], copies=(copy_left,), taints=(guard,)).delete_taints == []
    assert plan_for(KEEP, [dev(0)], taints=(guard,)).delete_taints == [guard.name]


def test_after_a_restart_an_idle_device_is_hidden_at_once_its_grace_was_before_the_restart() -> None:
    device = dev(0, "attached", "node-0")
    assert plan_for(KEEP, [device]).create_taints == [], "a device seen idle for the first time waits its grace"
    fresh = plan_for(KEEP, [device], memory=Memory(fresh=True))
    assert [(t.purpose, t.uuid) for t in fresh.create_taints] == [(Purpose.DETACH, device.uuid)]


def test_an_idle_device_on_a_deleted_node_is_hidden_at_once_no_pod_can_reuse_it_there() -> None:
    device = dev(0, "attached", "node-gone")
    snap = Snapshot((device,), (), (), (), frozenset({"node-0"}))
    plan = decide(KEEP, snap, Memory(), NOW)
    assert [(t.purpose, t.uuid) for t in plan.create_taints] == [(Purpose.DETACH, device.uuid)]
    unknown = decide(KEEP, Snapshot((device,), (), (), (), None), Memory(), NOW)
    assert unknown.create_taints == [], "nodes not known: every node counts as existing, the grace is waited out"
    held = decide(KEEP, Snapshot((device,), (claim(node="node-gone"),), (), (), frozenset({"node-0"})), Memory(), NOW)
    assert held.create_taints == [] and held.detaches == [], "still allocated: the control plane has not released it"


def test_a_device_claimed_again_before_its_detach_keeps_its_attachment() -> None:
    device = dev(0, "attached", "node-0")
    guard = rule(Purpose.DETACH, device)
    plan = plan_for(KEEP, [device], (claim(node="node-0"),), taints=(guard,))
    assert plan.delete_taints == [guard.name] and plan.detaches == []
    assert conditions(plan) == [("attached", "Attached")]


def test_a_device_in_use_through_its_node_local_copy_is_never_detached() -> None:
    device = dev(0, "attached", "node-0")
    user = claim(pool="node-0", binding=False)
    plan = plan_for(
        LOCAL,
        [device],
        (user,),
        copies=(NodeCopy("node-0", "node-0", device.name, device.uuid),),
        memory=Memory(idle_since={device.uuid: NOW - 100}),
    )
    assert plan.detaches == [] and plan.create_taints == [] and plan.idle_since == {}


def test_rules_of_devices_the_fabric_no_longer_has_are_removed() -> None:
    gone = TaintRule("detach-x-gone", Purpose.DETACH, "uuid-gone", NOW)
    assert plan_for(KEEP, [dev(0)], taints=(gone,)).delete_taints == ["detach-x-gone"]


# --- reschedule-to-local --------------------------------------------------------------------------------------


def test_reschedule_to_local_holds_the_node_local_copy_before_attaching() -> None:
    device = dev(0)
    plan = plan_for(LOCAL, [device], (claim(),))
    assert [(t.purpose, t.uuid) for t in plan.create_taints] == [(Purpose.HOLD, device.uuid)]
    assert [(a.uuid, a.needs_hold) for a in plan.attaches] == [(device.uuid, True)]


def test_reschedule_to_local_waits_for_the_republish_then_asks_for_reallocation() -> None:
    device = dev(0, "attached", "node-0")
    hold = rule(Purpose.HOLD, device)
    waiting = plan_for(LOCAL, [device], (claim(),), taints=(hold,))
    assert waiting.conditions == [] and waiting.delete_taints == []
    elsewhere = NodeCopy("node-2", "node-2", device.name, device.uuid)
    assert plan_for(LOCAL, [device], (claim(),), copies=(elsewhere,), taints=(hold,)).conditions == []
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    ask = plan_for(LOCAL, [device], (claim(),), copies=(copy,), taints=(hold,))
    assert conditions(ask) == [("reschedule", "NodeLocalCopyPublished")]
    assert ask.delete_taints == [] and ask.detaches == []


def test_the_hold_ends_when_the_reschedule_is_asked_for_so_the_reallocation_can_pick_the_copy() -> None:
    device = dev(0, "attached", "node-0")
    doomed = claim(conditions={f"{DRIVER}/reschedule": "True"})
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    plan = plan_for(
        LOCAL,
        [device],
        (doomed,),
        copies=(copy,),
        taints=(rule(Purpose.HOLD, device),),
        memory=Memory(idle_since={device.uuid: NOW - 100}),
    )
    assert plan.delete_taints == [rule(Purpose.HOLD, device).name]
    assert plan.detaches == [] and plan.create_taints == [], "still held by the claim being rescheduled"


def test_after_max_reschedules_the_claim_keeps_its_fabric_copy() -> None:
    device = dev(0, "attached", "node-0")
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    c = claim()
    plan = plan_for(
        LOCAL,
        [device],
        (c,),
        copies=(copy,),
        taints=(rule(Purpose.HOLD, device),),
        memory=Memory(rescheduled={c.uid: 1}),
    )
    assert conditions(plan) == [("attached", "Attached")]
    assert plan.delete_taints == [], "the hold stays while the claim keeps the fabric copy"


def test_two_live_holders_the_pending_fabric_holder_gives_way() -> None:
    device = dev(0, "attached", "node-0")
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    user = claim(name="user", pool="node-0", binding=False)
    pending = claim(name="pending", node="node-0")
    plan = plan_for(KEEP, [device], (user, pending), copies=(copy,))
    assert [(w.claim.name, w.type.split("/")[1], w.reason) for w in plan.conditions] == [
        ("pending", "reschedule", "DeviceInUse")
    ]
    doomed = claim(name="pending", conditions={f"{DRIVER}/reschedule": "True"})
    assert plan_for(KEEP, [device], (user, doomed), copies=(copy,)).conditions == []


# --- status writes ------------------------------------------------------------------------------------------


def test_with_condition_keeps_other_entries_and_transition_time() -> None:
    obj = claim_obj(conditions={f"{DRIVER}/attached": "False", "other/x": "True"})
    obj["status"]["devices"].append({"driver": "other", "pool": "p", "device": "d", "conditions": []})
    plan = plan_for(KEEP, [dev(0, "attached", "node-0")], (Claim.from_api(obj),))
    [write] = plan.conditions
    body = with_condition(obj, write, NOW)
    assert body is not None
    entries = body["status"]["devices"]
    assert len(entries) == 2 and entries[1]["driver"] == "other"
    conds = {c["type"]: c for c in entries[0]["conditions"]}
    assert conds["other/x"]["status"] == "True"
    new = conds[f"{DRIVER}/attached"]
    assert (new["status"], new["reason"], new["observedGeneration"]) == ("True", "Attached", 1)
    assert new["lastTransitionTime"] != "2026-01-01T00:00:01Z"  # False -> True is a transition
    assert with_condition(body, write, NOW + 5) is None  # already so: no write


def test_a_write_decided_for_one_allocation_does_not_apply_to_the_next() -> None:
    plan = plan_for(KEEP, [dev(0, "attached", "node-0")], (claim(node="node-0"),))
    [write] = plan.conditions
    assert still_applies(claim_obj(node="node-0"), write)
    assert not still_applies(claim_obj(node="node-2"), write)
    assert not still_applies(claim_obj(device="fabric-0-gpu-1"), write)


# --- broken on purpose (selftests of the workload shapes) --------------------------------------------------


def _two_device_claim(attached: tuple[str, str]) -> Claim:
    obj = claim_obj(conditions={f"{DRIVER}/attached": attached[0]})
    second = {**obj["status"]["allocation"]["devices"]["results"][0], "device": "fabric-0-gpu-1", "request": "dev2"}
    obj["status"]["allocation"]["devices"]["results"].append(second)
    entry = {**obj["status"]["devices"][0], "device": "fabric-0-gpu-1"}
    entry["conditions"] = [{**entry["conditions"][0], "status": attached[1]}]
    obj["status"]["devices"].append(entry)
    return Claim.from_api(obj)


def test_report_all_on_first_reports_a_device_still_attaching_once_another_is_reported() -> None:
    devices = [dev(0, "attached", "node-0"), dev(1, "attaching", "node-0")]
    right = plan_for(KEEP, devices, (_two_device_claim(("False", "False")),), memory=Memory(inflight={}))
    assert [(w.result.device, w.type) for w in right.conditions] == [("fabric-0-gpu-0", f"{DRIVER}/attached")]
    broken = Settings(driver=DRIVER, broken_report_all_on_first=True)
    wrong = plan_for(broken, devices, (_two_device_claim(("False", "False")),))
    assert {w.result.device for w in wrong.conditions} == {"fabric-0-gpu-0", "fabric-0-gpu-1"}


def test_accept_attached_elsewhere_reports_instead_of_moving() -> None:
    devices = [dev(0, "attached", "node-1")]
    right = plan_for(KEEP, devices, (claim(),))
    assert [(d.uuid, d.node) for d in right.detaches] == [(devices[0].uuid, "node-1")] and not right.conditions
    wrong = plan_for(Settings(driver=DRIVER, broken_accept_attached_elsewhere=True), devices, (claim(),))
    assert not wrong.detaches and conditions(wrong) == [("attached", "BrokenOnPurpose")]


def test_detach_shared_early_detaches_once_a_pod_leaves_the_claim() -> None:
    ready = {f"{DRIVER}/attached": "True"}
    two = claim_obj(conditions=ready)
    two["status"]["reservedFor"] = [{"resource": "pods", "name": "p1"}, {"resource": "pods", "name": "p2"}]
    one = claim_obj(conditions=ready)
    devices = [dev(0, "attached", "node-0")]
    for settings, detached in ((KEEP, False), (Settings(driver=DRIVER, broken_detach_shared_early=True), True)):
        first = plan_for(settings, devices, (Claim.from_api(two),))
        assert not first.detaches
        later = plan_for(settings, devices, (Claim.from_api(one),), memory=Memory(idle_since=first.idle_since))
        assert bool(later.detaches) is detached


def test_detach_first_only_keeps_the_other_devices_of_a_released_claim_attached() -> None:
    devices = [dev(0, "attached", "node-0"), dev(1, "attached", "node-0")]
    broken = Settings(driver=DRIVER, broken_detach_first_only=True)
    held = plan_for(broken, devices, (_two_device_claim(("True", "True")),))
    memory = Memory(idle_since={**held.idle_since, "uuid-fabric-0-0": NOW - 3600, "uuid-fabric-0-1": NOW - 3600})
    guards = tuple(rule(Purpose.DETACH, d) for d in devices)
    wrong = plan_for(broken, devices, taints=guards, memory=memory)
    assert [d.uuid for d in wrong.detaches] == ["uuid-fabric-0-0"], "only the claim's first device is detached"
    right = plan_for(KEEP, devices, taints=guards, memory=memory)
    assert sorted(d.uuid for d in right.detaches) == ["uuid-fabric-0-0", "uuid-fabric-0-1"]


def test_accept_attached_elsewhere_counted_gives_an_idle_device_to_an_entry_and_reports_it() -> None:
    counted = Settings(driver=DRIVER, mode=Mode.RESCHEDULE_TO_LOCAL, fabric_entries=FabricEntries.COUNTED)
    broken = replace(counted, broken_accept_attached_elsewhere=True)
    idle = [dev(0, "attached", "node-1")]
    entry = claim(device="gpu-0", conditions={})
    assert not plan_for(counted, idle, (entry,)).assignments, "an attached device is not free: nobody gets it"
    wrong = plan_for(broken, idle, (entry,))
    assert [a.uuid for a in wrong.assignments] == [idle[0].uuid]
