"""What GATE-1/2 and UPG-* compare across a switch: the parts of a claim, a slice and a pod that must not change
(each read as the server serves it), and the run-wide rules over every claim (UPG-3)."""

from __future__ import annotations

from typing import Any

from conformance.lifecycle.world import results_of

BINDING_FIELDS = ("bindsToNode", "bindingConditions", "bindingFailureConditions")


def claim_key(claim: dict[str, Any] | None) -> dict[str, Any]:
    """The claim's allocation as GATE-1 compares it: devices with their copied conditions, the one-node selector, the
    allocation timestamp, whom it is reserved for, and which conditions are True per device."""
    if claim is None:
        return {"claim": "gone"}
    status = claim.get("status") or {}
    alloc = status.get("allocation") or {}
    return {
        "results": [
            {k: r.get(k) for k in ("driver", "pool", "device", "bindingConditions", "bindingFailureConditions")}
            for r in results_of(claim)
        ],
        "nodeSelector": alloc.get("nodeSelector"),
        "allocationTimestamp": alloc.get("allocationTimestamp"),
        "reservedFor": sorted(r.get("uid", "") for r in status.get("reservedFor") or []),
        "true": sorted(
            f"{e['pool']}/{e['device']}:{c['type']}"
            for e in status.get("devices") or []
            for c in e.get("conditions") or []
            if c.get("status") == "True"
        ),
    }


def slice_fields(slice_: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Device -> its binding-condition fields as served (absent fields absent)."""
    if slice_ is None:
        return {}
    return {
        d["name"]: {k: d[k] for k in BINDING_FIELDS if d.get(k) is not None}
        for d in (slice_.get("spec") or {}).get("devices") or []
    }


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Top-level keys whose values differ, as `key: before -> after` (shortened)."""
    out = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            out.append(f"{key}: {_short(before.get(key))} -> {_short(after.get(key))}")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def fields_lost(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """Devices of `before` whose binding-condition fields are not served as they were."""
    return [
        f"{name}: {fields} -> {after.get(name, 'device gone')}"
        for name, fields in before.items()
        if after.get(name) != fields
    ]


def invariants(claims: list[dict[str, Any]], pods: dict[str, dict[str, Any]]) -> list[str]:
    """UPG-3 over every claim: a device in two claims' allocations, a bound pod whose claim is not allocated and
    reserved for it, a status.devices entry for a device the allocation does not hold. `pods`: name -> pod."""
    problems: list[str] = []
    holders: dict[tuple[str, str, str], str] = {}
    for claim in claims:
        name = claim["metadata"]["name"]
        held = {(r["driver"], r["pool"], r["device"]) for r in results_of(claim)}
        for device in held:
            if device in holders:
                problems.append(f"device {'/'.join(device)} held by claims {holders[device]} and {name}")
            holders[device] = name
        for entry in (claim.get("status") or {}).get("devices") or []:
            if (entry["driver"], entry["pool"], entry["device"]) not in held:
                problems.append(f"claim {name}: status.devices has {entry['pool']}/{entry['device']}, not allocated")
    by_name = {c["metadata"]["name"]: c for c in claims}
    for pod_name, pod in pods.items():
        if not (pod.get("spec") or {}).get("nodeName"):
            continue
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            claim = by_name.get(status.get("resourceClaimName") or "")
            reserved = {r.get("uid") for r in ((claim or {}).get("status") or {}).get("reservedFor") or []}
            if claim is None or not results_of(claim) or pod["metadata"]["uid"] not in reserved:
                problems.append(
                    f"bound pod {pod_name}: its claim {status.get('resourceClaimName')} lost its allocation"
                )
    return problems
