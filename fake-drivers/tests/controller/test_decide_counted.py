"""Count-based fabric pools (--fabric-entries counted) as pure decisions: entries per model without identity,
any free device assigned, the assignment written before the attach, reschedule to the node-local copy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from test_decide import DRIVER, LOCAL, NOW, claim_obj, conditions, dev, plan_for, rule

from fake_drivers.controller.decide import Assignment, ConditionWrite, Failure, Memory, assignment_key
from fake_drivers.controller.model import Claim, CountedEntry, NodeCopy, entry_model
from fake_drivers.controller.objects import pool_slices, with_assignment, with_condition
from fake_drivers.controller.settings import FabricEntries, Mode, Purpose, Settings

COUNTED = replace(LOCAL, fabric_entries=FabricEntries.COUNTED)


def counted_claim(entry: str = "gpu-0", uuid: str | None = None, name: str = "c1", **kwargs: Any) -> Claim:
    """A claim holding a count entry; `uuid`: the device the controller assigned it (status.devices[].data)."""
    obj = claim_obj(device=entry, name=name, **kwargs)
    if uuid:
        devices = obj["status"].setdefault("devices", [{"driver": DRIVER, "pool": "fabric-0", "device": entry}])
        devices[0]["data"] = {"uuid": uuid}
    return Claim.from_api(obj)


def names(plan, fabric: str = "fabric-0") -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(e.name for e in plan.pools[fabric])


def test_counted_needs_reschedule_to_local() -> None:
    with pytest.raises(ValueError, match="reschedule-to-local"):
        Settings(mode=Mode.KEEP_IN_POOL, fabric_entries=FabricEntries.COUNTED)


def test_pool_lists_one_entry_per_free_device_per_model_without_identity() -> None:
    devices = [dev(0), dev(1), dev(2, "attached", "node-0"), dev(3, "attaching", "node-2"), dev(0, fabric="fabric-1")]
    plan = plan_for(COUNTED, devices)
    assert names(plan) == ["gpu-0", "gpu-1"]
    assert names(plan, "fabric-1") == ["gpu-0"]
    assert all(isinstance(e, CountedEntry) for e in plan.pools["fabric-0"])
    [body] = pool_slices(COUNTED, "fabric-0", plan.pools["fabric-0"], generation=1)
    entry = body["spec"]["devices"][0]
    assert "uuid" not in entry["attributes"], "count entries carry no physical identity"
    assert entry["attributes"]["model"] == {"string": "gpu"}
    assert entry["attributes"]["memoryGiB"] == {"int": 80}
    assert entry["bindsToNode"] is True
    assert entry["bindingFailureConditions"] == [f"{DRIVER}/attach-failed", f"{DRIVER}/reschedule"]


def test_quarantined_guarded_and_failed_devices_are_not_counted_free() -> None:
    devices = [dev(0), dev(1), dev(2), dev(3)]
    taints = (rule(Purpose.QUARANTINE, devices[0], until=NOW + 60), rule(Purpose.DETACH, devices[1]))
    memory = Memory(failures={devices[2].uuid: Failure("X", "y")})
    assert names(plan_for(COUNTED, devices, taints=taints, memory=memory)) == ["gpu-0"]


def test_an_allocated_entry_gets_a_free_device_written_to_the_claim_before_any_attach() -> None:
    devices = [dev(0), dev(1)]
    plan = plan_for(COUNTED, devices, (counted_claim("gpu-1"),))
    assert [(a.claim.name, a.result.device, a.uuid) for a in plan.assignments] == [("c1", "gpu-1", devices[0].uuid)]
    assert plan.attaches == [] and plan.conditions == []
    # The pool does not change: the allocated entry stays listed, one entry is left for the other free device.
    assert names(plan) == ["gpu-0", "gpu-1"]


def test_once_assigned_the_device_is_held_then_attached_with_a_hold_first() -> None:
    devices = [dev(0), dev(1)]
    c = counted_claim("gpu-1", uuid=devices[1].uuid)
    plan = plan_for(COUNTED, devices, (c,))
    assert plan.assignments == []
    assert [(t.purpose, t.uuid) for t in plan.create_taints] == [(Purpose.HOLD, devices[1].uuid)]
    assert [(a.uuid, a.node, a.needs_hold) for a in plan.attaches] == [(devices[1].uuid, "node-0", True)]
    assert names(plan) == ["gpu-0", "gpu-1"], "one held entry and one for the free device 0"


def test_an_assignment_the_cache_does_not_show_yet_comes_from_memory() -> None:
    devices = [dev(0), dev(1)]
    c = counted_claim("gpu-0")
    memory = Memory(assigned={assignment_key(c, c.results[0]): devices[1].uuid})
    plan = plan_for(COUNTED, devices, (c,), memory=memory)
    assert plan.assignments == []
    assert [a.uuid for a in plan.attaches] == [devices[1].uuid]
    # A new allocation of the claim (new allocationTimestamp) does not inherit it.
    obj = claim_obj(device="gpu-0")
    obj["status"]["allocation"]["allocationTimestamp"] = "2026-01-01T00:01:00Z"
    later = Claim.from_api(obj)
    assert [a.uuid for a in plan_for(COUNTED, devices, (later,), memory=memory).assignments] == [devices[0].uuid]


def test_two_entries_get_two_devices_and_no_free_device_is_a_failure() -> None:
    devices = [dev(0), dev(1)]
    claims = (counted_claim("gpu-0", name="a"), counted_claim("gpu-1", name="b"), counted_claim("gpu-2", name="c"))
    plan = plan_for(COUNTED, devices, claims)
    assert sorted((a.claim.name, a.uuid) for a in plan.assignments) == [("a", devices[0].uuid), ("b", devices[1].uuid)]
    assert [(w.claim.name, w.type.split("/")[1], w.reason) for w in plan.conditions] == [
        ("c", "attach-failed", "NoFreeDevice")
    ]
    assert names(plan) == ["gpu-0", "gpu-1", "gpu-2"], "allocated entries only: nothing is left free"


def test_republished_node_locally_asks_for_reallocation_and_ends_the_hold() -> None:
    device = dev(0, "attached", "node-0")
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    c = counted_claim("gpu-0", uuid=device.uuid)
    ask = plan_for(COUNTED, [device], (c,), copies=(copy,), taints=(rule(Purpose.HOLD, device),))
    assert conditions(ask) == [("reschedule", "NodeLocalCopyPublished")]
    assert ask.conditions[0].uuid == device.uuid, "the condition write names the physical device (data.uuid)"
    doomed = counted_claim("gpu-0", uuid=device.uuid, conditions={f"{DRIVER}/reschedule": "True"})
    after = plan_for(COUNTED, [device], (doomed,), copies=(copy,), taints=(rule(Purpose.HOLD, device),))
    assert after.delete_taints == [rule(Purpose.HOLD, device).name]
    assert after.conditions == [] and after.detaches == []


def test_a_failed_attach_quarantines_the_physical_device_and_the_next_entry_gets_another() -> None:
    devices = [dev(0), dev(1)]
    c = counted_claim("gpu-0", uuid=devices[0].uuid)
    plan = plan_for(COUNTED, devices, (c,), memory=Memory(failures={devices[0].uuid: Failure("LinkDown", "gone")}))
    assert (Purpose.QUARANTINE, devices[0].uuid) in [(t.purpose, t.uuid) for t in plan.create_taints]
    assert conditions(plan) == [("attach-failed", "LinkDown")]
    # Reallocated (the failed allocation is gone): the quarantined device is not assigned again.
    quarantine = rule(Purpose.QUARANTINE, devices[0], until=NOW + 60, reason="LinkDown")
    again = plan_for(COUNTED, devices, (counted_claim("gpu-0"),), taints=(quarantine,))
    assert [a.uuid for a in again.assignments] == [devices[1].uuid]
    assert names(again) == ["gpu-0"]


def test_in_use_through_the_node_local_copy_the_device_is_neither_counted_nor_detached() -> None:
    device = dev(0, "attached", "node-0")
    copy = NodeCopy("node-0", "node-0", device.name, device.uuid)
    user = Claim.from_api(claim_obj(device=device.name, pool="node-0", binding=False))
    plan = plan_for(COUNTED, [device, dev(1)], (user,), copies=(copy,), memory=Memory(idle_since={device.uuid: 0}))
    assert plan.detaches == [] and plan.create_taints == []
    assert names(plan) == ["gpu-0"]


def test_entry_names_parse_back_to_model_and_index() -> None:
    assert entry_model("fake-gpu-12") == ("fake-gpu", 12)
    assert entry_model("fabric-0-fake-gpu-x") is None


def test_assignment_and_condition_writes_carry_the_physical_uuid_in_data() -> None:
    c = counted_claim("gpu-0")
    obj = claim_obj(device="gpu-0")
    body, uuid = with_assignment(obj, Assignment(c, c.results[0], "uuid-a"))
    assert uuid == "uuid-a" and body is not None
    assert body["status"]["devices"] == [
        {"driver": DRIVER, "pool": "fabric-0", "device": "gpu-0", "data": {"uuid": "uuid-a"}}
    ]
    # An entry that already names a device keeps it.
    again, kept = with_assignment(body, Assignment(c, c.results[0], "uuid-b"))
    assert (again, kept) == (None, "uuid-a")
    body["status"]["devices"][0]["conditions"] = None  # as the server returns an entry written without any
    write = ConditionWrite(c, c.results[0], f"{DRIVER}/reschedule", "NodeLocalCopyPublished", "m", "uuid-a")
    written = with_condition(body, write, NOW)
    assert written is not None
    [entry] = written["status"]["devices"]
    assert entry["data"] == {"uuid": "uuid-a"} and entry["conditions"][0]["reason"] == "NodeLocalCopyPublished"
