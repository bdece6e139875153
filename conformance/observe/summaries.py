"""What the run-wide record keeps of objects it does not keep whole: slices (devices and identities), nodes
(readiness, labels, taints) and events. A run of hundreds of pool rewrites and node heartbeats stays in memory."""

from __future__ import annotations

from typing import Any

from conformance.observe.slices import device_identity


def slice_summary(obj: dict[str, Any], attribute: str | None) -> dict[str, Any]:
    """Driver, pool, generation, where (nodeName, "allNodes", "nodeSelector") and each device's name, identity (the
    identity attribute, where the device carries it), binding conditions and taints."""
    spec = obj.get("spec") or {}
    driver = spec.get("driver") or ""
    devices = []
    for d in spec.get("devices") or []:
        entry: dict[str, Any] = {"name": d["name"]}
        if attribute and (ident := device_identity(d, attribute, driver)):
            entry["identity"] = ident
        if d.get("bindingConditions"):
            entry["bindingConditions"] = list(d["bindingConditions"])
        if d.get("taints"):
            entry["taints"] = list(d["taints"])
        devices.append(entry)
    where = spec.get("nodeName") or (
        "allNodes" if spec.get("allNodes") else "nodeSelector" if spec.get("nodeSelector") else ""
    )
    return {
        "driver": driver,
        "pool": (spec.get("pool") or {}).get("name"),
        "generation": (spec.get("pool") or {}).get("generation"),
        "where": where,
        "nodeName": spec.get("nodeName") or "",
        "devices": devices,
    }


def node_summary(obj: dict[str, Any]) -> dict[str, Any]:
    conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
    spec = obj.get("spec") or {}
    return {
        "labels": obj["metadata"].get("labels") or {},
        "ready": conditions.get("Ready"),
        "taints": spec.get("taints") or [],
        "unschedulable": bool(spec.get("unschedulable")),
    }


def event_summary(obj: dict[str, Any]) -> dict[str, Any]:
    involved = obj.get("involvedObject") or {}
    return {
        "reason": obj.get("reason"),
        "message": obj.get("message"),
        "type": obj.get("type"),
        "count": obj.get("count"),
        "object": {k: involved.get(k) for k in ("kind", "namespace", "name")},
        "source": (obj.get("source") or {}).get("component") or obj.get("reportingComponent"),
        "eventTime": obj.get("eventTime"),  # the recorder's clock, to the microsecond (SCH-6 dates the timeout)
    }
