"""What the controller writes, as plain resource.k8s.io/v1 dicts: fabric pool slices, taint rules, conditions."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from ..dra import (
    IDENTITY_ATTRIBUTE,
    MANAGED_BY,
    RESOURCE_GROUP,
    RESOURCE_VERSION,
    device_attributes,
    slice_name,
    typed_attribute,
)
from ..pools import pool_bodies
from .decide import Assignment, ConditionWrite, TaintCreate
from .model import MESSAGE, REASON, SINCE, UNTIL, Claim, CountedEntry, FabricDevice
from .settings import DEVICE_LABEL, DRIVER_LABEL, FABRIC_LABEL, MANAGER, PURPOSE_LABEL, Settings

API_VERSION = f"{RESOURCE_GROUP}/{RESOURCE_VERSION}"
# The fields of a published device this controller sets; compared to decide whether a slice must be rewritten.
DEVICE_FIELDS = ("name", "attributes", "bindsToNode", "bindingConditions", "bindingFailureConditions")


def fabric_device_entry(settings: Settings, device: FabricDevice | CountedEntry) -> dict[str, Any]:
    """A fabric copy: pinned to one node when allocated, usable only once the controller reports it attached."""
    if isinstance(device, CountedEntry):  # capacity of a model: its attributes, no physical identity
        attributes = {
            **{k: typed_attribute(v) for k, v in device.attributes.items()},
            "model": {"string": device.model},
        }
    else:  # same attributes as the node driver's hot-plugged copy, so one DeviceClass matches both copies
        attributes = device_attributes(device.uuid, device.model, device.attributes)
    return {
        "name": device.name,
        "attributes": attributes,
        "bindsToNode": True,
        "bindingConditions": settings.binding_conditions,
        "bindingFailureConditions": settings.failure_conditions,
    }


def pool_template(settings: Settings, fabric: str) -> dict[str, Any]:
    """The part every slice of a fabric's pool shares; the pool reaches the nodes with the fabric's label."""
    selector = {"key": settings.node_label, "operator": "In", "values": [fabric]}
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(settings.driver, fabric), "labels": pool_labels(settings, fabric)},
        "spec": {
            "driver": settings.driver,
            "pool": {"name": fabric},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [selector]}]},
        },
    }


def pool_labels(settings: Settings, fabric: str) -> dict[str, str]:
    """On every slice of the pool: how the controller lists a pool's slices, including stale extra ones."""
    return {MANAGED_BY: MANAGER, DRIVER_LABEL: settings.driver, FABRIC_LABEL: fabric}


def pool_slices(
    settings: Settings, fabric: str, devices: list[FabricDevice | CountedEntry], generation: int
) -> list[dict[str, Any]]:
    """One pool per fabric, in as many slices as it needs (at most 128 devices each)."""
    entries = [fabric_device_entry(settings, d) for d in devices]
    return pool_bodies(pool_template(settings, fabric), entries, generation)


def slice_content(obj: dict[str, Any]) -> tuple[Any, Any]:
    """What decides whether a published pool slice is current (server defaults left out)."""
    spec = obj.get("spec") or {}
    devices = [{k: d.get(k) for k in DEVICE_FIELDS} for d in spec.get("devices") or []]
    return devices, spec.get("nodeSelector")


def taint_rule(settings: Settings, taint: TaintCreate, now: float, version: str = RESOURCE_VERSION) -> dict[str, Any]:
    """A NoSchedule taint on every copy of one physical device: the fabric copy and any node-local copy.

    The selector names the driver and the device but no pool: the node driver publishes a hot-plugged device
    under the fabric's device name, so one rule covers the device wherever it is offered.
    """
    notes = {SINCE: f"{now:.3f}"}
    if taint.until is not None:
        notes[UNTIL] = f"{taint.until:.3f}"
    if taint.reason:
        notes[REASON] = taint.reason
    if taint.message:
        notes[MESSAGE] = taint.message
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": settings.taint_rule_name(taint.purpose, taint.uuid),
            "labels": {
                MANAGED_BY: MANAGER,
                DRIVER_LABEL: settings.driver,
                PURPOSE_LABEL: taint.purpose.value,
                DEVICE_LABEL: taint.uuid,
            },
            "annotations": notes,
        },
        "spec": {
            "deviceSelector": {"driver": settings.driver, "device": taint.device},
            "taint": {"key": settings.taint_key(taint.purpose), "value": taint.uuid, "effect": "NoSchedule"},
        },
    }


def rfc3339(now: float) -> str:
    return datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _device_entry(body: dict[str, Any], key: tuple[str, str, str]) -> dict[str, Any]:
    """The status.devices[] entry of one allocated device (made if missing) in `body`."""
    entries = body.setdefault("status", {}).setdefault("devices", [])
    for e in entries:
        if (e.get("driver"), e.get("pool"), e.get("device")) == key and not e.get("shareID"):
            return e
    driver, pool, device = key
    entries.append({"driver": driver, "pool": pool, "device": device})
    return entries[-1]


def with_assignment(claim: dict[str, Any], assignment: Assignment) -> tuple[dict[str, Any] | None, str]:
    """counted: the claim with data.uuid of the assigned device in status.devices[]; (None, uuid there) when the
    entry already names a device (the same one, or another one an earlier pass assigned: that one stays)."""
    body = copy.deepcopy(claim)
    entry = _device_entry(body, assignment.result.key)
    there = (entry.get("data") or {}).get(IDENTITY_ATTRIBUTE)
    if there:
        return None, str(there)
    entry["data"] = {**(entry.get("data") or {}), IDENTITY_ATTRIBUTE: assignment.uuid}
    return body, assignment.uuid


def with_condition(claim: dict[str, Any], write: ConditionWrite, now: float) -> dict[str, Any] | None:
    """The claim with the condition set in status.devices[] (driver/pool/device); None if already so.

    Other conditions and other drivers' entries are kept as they are. lastTransitionTime changes only when the
    status does, as metav1.Condition requires. data.uuid names the physical device when the write knows it.
    """
    body = copy.deepcopy(claim)
    entry = _device_entry(body, write.result.key)
    data_changed = False
    if write.uuid and (entry.get("data") or {}).get(IDENTITY_ATTRIBUTE) != write.uuid:
        entry["data"] = {**(entry.get("data") or {}), IDENTITY_ATTRIBUTE: write.uuid}
        data_changed = True
    conditions = entry["conditions"] = entry.get("conditions") or []  # the server may return null
    generation = int(body["metadata"].get("generation") or 0)
    new = {
        "type": write.type,
        "status": "True",
        "reason": write.reason,
        "message": write.message[:32768],
        "observedGeneration": generation,
        "lastTransitionTime": rfc3339(now),
    }
    for i, old in enumerate(conditions):
        if old.get("type") != write.type:
            continue
        if old.get("status") == "True" and old.get("reason") == write.reason:
            return body if data_changed else None
        if old.get("status") == "True":
            new["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
        conditions[i] = new
        return body
    conditions.append(new)
    return body


def still_applies(claim: dict[str, Any], write: ConditionWrite) -> bool:
    """After a conflict: is the allocation the decision was made for still there (same device, same node)?"""
    fresh = Claim.from_api(claim)
    return fresh.uid == write.claim.uid and fresh.node == write.claim.node and write.result in fresh.results
