"""The reconciler executes a plan in a safe order (fakes for the API and the fabric; no cluster)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes.client.exceptions import ApiException
from test_decide import KEEP, LOCAL, NOW, claim_obj, dev

from fake_drivers.controller.decide import Failure
from fake_drivers.controller.fabric import Outcome
from fake_drivers.controller.metrics import Metrics
from fake_drivers.controller.model import FabricDevice
from fake_drivers.controller.reconciler import Caches, Reconciler
from fake_drivers.controller.settings import FabricEntries, Purpose, Settings


@dataclass
class FakeCache:
    objects: list[dict[str, Any]] = field(default_factory=list)
    synced: threading.Event = field(default_factory=threading.Event)

    def items(self) -> list[dict[str, Any]]:
        return list(self.objects)


@dataclass
class FakeKube:
    calls: list[tuple[str, str]] = field(default_factory=list)
    fresh_claims: list[dict[str, Any]] = field(default_factory=list)
    refuse_taints: bool = False

    def list_claims(self) -> list[dict[str, Any]]:
        self.calls.append(("list_claims", ""))
        return self.fresh_claims

    def node_names(self) -> frozenset[str]:  # every node a device of these tests is attached to exists
        return frozenset({"node-0", "node-1", "node-2", "node-3"})

    def sync_pool(self, fabric: str, devices: list[FabricDevice], cached: dict[str, Any] | None) -> int | None:
        self.calls.append(("sync_pool", fabric))
        return None

    def create_taint(self, taint: Any, now: float) -> bool:
        if self.refuse_taints:
            raise ApiException(status=403, reason="Forbidden")
        self.calls.append(("create_taint", taint.purpose.value))
        return True

    def delete_taint(self, name: str) -> None:
        self.calls.append(("delete_taint", name))

    def write_condition(self, write: Any, now: float, cached: Any = None) -> str:
        self.calls.append(("write_condition", write.type.split("/")[1]))
        return "written"

    def write_assignment(self, assignment: Any) -> str | None:
        if self.refuse_taints:  # the same switch: the API refuses writes
            raise ApiException(status=500, reason="Internal")
        self.calls.append(("write_assignment", assignment.uuid))
        return str(assignment.uuid)


@dataclass
class FakeFabric:
    devices_: list[FabricDevice]
    ops: list[tuple[str, str]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def devices(self) -> list[FabricDevice]:
        return self.devices_

    def attach(self, uuid: str, node: str) -> Outcome:
        self.ops.append(("attach", uuid))
        self.done.set()
        return Outcome(ok=True)

    def detach(self, uuid: str, node: str | None) -> Outcome:
        self.ops.append(("detach", uuid))
        self.done.set()
        return Outcome(ok=True)


def reconciler(
    settings: Settings, devices: list[FabricDevice], claims: list[dict[str, Any]], kube: FakeKube | None = None
) -> tuple[Reconciler, FakeKube, FakeFabric]:
    kube = kube or FakeKube()
    fabric = FakeFabric(devices)
    r = Reconciler(settings, kube, fabric, Metrics(), poll_s=0.05)  # type: ignore[arg-type]
    r.caches = Caches(FakeCache(claims), FakeCache(), FakeCache())  # type: ignore[arg-type]
    return r, kube, fabric


def test_the_quarantine_rule_is_written_before_the_claim_is_told() -> None:
    r, kube, fabric = reconciler(KEEP, [dev(0)], [claim_obj()])
    r._failures["uuid-fabric-0-0"] = Failure("FabricLinkDown", "link lost")
    r.reconcile_once()
    order = [c for c in kube.calls if c[0] in ("create_taint", "write_condition")]
    assert order == [("create_taint", "quarantine"), ("write_condition", "attach-failed")]
    assert fabric.ops == [] and r._failures == {}


def test_no_attach_in_reschedule_to_local_until_the_hold_rule_exists() -> None:
    r, kube, fabric = reconciler(LOCAL, [dev(0)], [claim_obj()], FakeKube(refuse_taints=True))
    r.reconcile_once()
    assert fabric.ops == []
    kube.refuse_taints = False
    r.reconcile_once()
    assert fabric.done.wait(5) and fabric.ops == [("attach", "uuid-fabric-0-0")]


def test_an_idle_detach_is_skipped_when_a_fresh_read_shows_a_new_holder() -> None:
    device = dev(0, "attached", "node-0")
    guard = {
        "metadata": {
            "name": "g",
            "labels": {
                "fake-drivers.example.com/purpose": Purpose.DETACH.value,
                "fake-drivers.example.com/device-uuid": device.uuid,
            },
            "annotations": {"reference-controller.fake-drivers.example.com/since": str(NOW - 60)},
        }
    }
    kube = FakeKube(fresh_claims=[claim_obj()])
    r, kube, fabric = reconciler(KEEP, [device], [], kube)
    r.caches.taints.objects.append(guard)  # type: ignore[union-attr]
    r._idle[device.uuid] = 0.0
    r.reconcile_once()
    assert ("list_claims", "") in kube.calls and fabric.ops == []
    kube.fresh_claims = []
    r.reconcile_once()
    assert fabric.done.wait(5) and fabric.ops == [("detach", device.uuid)]


def test_counted_attaches_only_a_device_whose_assignment_the_claim_took() -> None:
    counted = replace(LOCAL, fabric_entries=FabricEntries.COUNTED)
    devices = [dev(0), dev(1)]
    r, kube, fabric = reconciler(counted, devices, [claim_obj(device="gpu-1")], FakeKube(refuse_taints=True))
    r.reconcile_once()  # the assignment write is refused: nothing is attached, nothing remembered
    assert fabric.ops == [] and r._assigned == {}
    kube.refuse_taints = False
    r.reconcile_once()  # assignment written (and the hold made), the attach waits for the next pass
    assert ("write_assignment", devices[0].uuid) in kube.calls and fabric.ops == []
    r.reconcile_once()  # the claim names the device (from memory: the fake cache never changes)
    assert fabric.done.wait(5) and fabric.ops == [("attach", devices[0].uuid)]
    assert [c for c in kube.calls if c[0] == "write_assignment"] == [("write_assignment", devices[0].uuid)]
