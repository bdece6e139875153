"""A device its node still uses (the node's driver prepared it for a claim; the kubelet has not unprepared it): a pod
force-deleted while its container runs leaves its claim released in the API, and the device must stay where it is
until the node lets it go: neither detached nor moved to another claim's node (NODE-4)."""

from __future__ import annotations

from dataclasses import replace

from test_decide import DRIVER, KEEP, NOW, claim, dev, plan_for

from fake_drivers.controller.decide import Memory, Snapshot, decide
from fake_drivers.controller.model import FabricDevice
from fake_drivers.controller.settings import Purpose, Settings

BROKEN = replace(KEEP, broken_detach_on_release=True)


def used(device: FabricDevice, claim_uid: str = "uid-gone", node: str = "node-0") -> FabricDevice:
    return replace(device, uses=((claim_uid, node),))


def test_a_released_device_its_node_still_uses_is_kept_until_the_node_unprepares_it() -> None:
    device = used(dev(0, "attached", "node-0"))
    plan = plan_for(KEEP, [device], memory=Memory(idle_since={device.uuid: NOW - 100}))
    assert plan.create_taints == [] and plan.detaches == [] and plan.idle_since == {}
    assert "waiting for NodeUnprepareResources" in plan.states[f"device {device.name}"]
    # Once the node lets it go, the idle grace starts then (no timer was kept meanwhile).
    after = plan_for(KEEP, [replace(device, uses=())], memory=Memory(idle_since=plan.idle_since))
    assert after.create_taints == [] and after.idle_since == {device.uuid: NOW}
    # A use on another node than the one it is attached to says nothing about this attachment.
    stale = plan_for(KEEP, [used(dev(0, "attached", "node-0"), node="node-1")], memory=Memory(fresh=True))
    assert [(t.purpose, t.uuid) for t in stale.create_taints] == [(Purpose.DETACH, device.uuid)]


def test_a_claim_on_another_node_waits_for_the_node_that_still_uses_the_device() -> None:
    device = used(dev(0, "attached", "node-1"), node="node-1")
    plan = plan_for(KEEP, [device], (claim(node="node-0"),))
    assert plan.detaches == [] and plan.attaches == [] and plan.conditions == []
    assert "the move to node-0 waits" in plan.states["claim ns/c1 fabric-0/fabric-0-gpu-0"]
    moved = plan_for(KEEP, [replace(device, uses=())], (claim(node="node-0"),))
    assert [(d.uuid, d.node) for d in moved.detaches] == [(device.uuid, "node-1")]


def test_the_claim_in_use_on_its_own_node_is_reported_as_usual() -> None:
    device = used(dev(0, "attached", "node-0"), claim_uid="uid-c1")
    assert [c.type for c in plan_for(KEEP, [device], (claim(node="node-0"),)).conditions] == [f"{DRIVER}/attached"]


def test_a_deleted_node_uses_nothing() -> None:
    device = used(dev(0, "attached", "node-gone"), node="node-gone")
    plan = decide(KEEP, Snapshot((device,), (), (), (), frozenset({"node-0"})), Memory(), NOW)
    assert [(t.purpose, t.uuid) for t in plan.create_taints] == [(Purpose.DETACH, device.uuid)]


def test_broken_detach_on_release_ignores_the_node_and_the_idle_grace() -> None:
    device = used(dev(0, "attached", "node-0"))
    gone = plan_for(BROKEN, [device])
    assert [(d.uuid, d.node) for d in gone.detaches] == [(device.uuid, "node-0")] and not gone.create_taints
    moved = plan_for(BROKEN, [used(dev(0, "attached", "node-1"), node="node-1")], (claim(node="node-0"),))
    assert [(d.uuid, d.node) for d in moved.detaches] == [(device.uuid, "node-1")]
    assert "--broken-detach-on-release" in Settings(broken_detach_on_release=True).broken_modes()


def test_the_fabric_api_carries_the_uses() -> None:
    api = {"uuid": "u", "name": "n", "fabric": "f", "model": "m", "state": "attached", "node": "node-0"}
    uses = [{"claim": "uid-1", "node": "node-0", "since": "2026-01-01T00:00:00Z"}]
    device = FabricDevice.from_api({**api, "uses": uses})
    assert device.used_on("node-0") == ["uid-1"] and device.used_on("node-1") == []
    assert FabricDevice.from_api(api).uses == ()
