"""Reading what an implementation publishes, without knowing its names: slices, selectors, identities, probe."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.implementation import endpoints


def driver_slices(cluster: Cluster, driver: str) -> list[dict[str, Any]]:
    api = client.CustomObjectsApi(cluster.api)
    return api.list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
    )["items"]


def fabric_slices(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Slices without a node whose devices carry binding conditions: the fabric pools."""
    return [
        s
        for s in slices
        if not s["spec"].get("nodeName") and any(d.get("bindingConditions") for d in (s["spec"].get("devices") or []))
    ]


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values", [])
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # Gt/Lt: not used for node selection by DRA drivers we know; treat as no match


def reaches(slice_: dict[str, Any], node: str, labels: dict[str, str]) -> bool:
    """Whether a ResourceSlice's devices are available on `node` (nodeName, allNodes or nodeSelector)."""
    spec = slice_["spec"]
    if spec.get("nodeName"):
        return spec["nodeName"] == node
    if spec.get("allNodes"):
        return True
    terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms", [])
    for term in terms:
        exprs_ok = all(_expression_matches(e, labels) for e in term.get("matchExpressions", []))
        fields_ok = all(_expression_matches(e, {"metadata.name": node}) for e in term.get("matchFields", []))
        if exprs_ok and fields_ok:
            return True
    return False


def device_identity(device: dict[str, Any], attribute: str, driver: str) -> str | None:
    """The value of the identity attribute of one published device (qualified, or unqualified in the driver's own
    domain), as a string; None when the device does not carry it (e.g. a counted fabric entry)."""
    domain, _, name = attribute.rpartition("/")
    attrs = device.get("attributes") or {}
    value = attrs.get(attribute) or (attrs.get(name) if domain in ("", driver) else None)
    return str(next(iter(value.values()))) if value else None


def model_disagreements(
    slices: list[dict[str, Any]],
    *,
    binding_model: str,
    fabric_entries: str,
    identity_attribute: str,
    model_attribute: str,
    failure_conditions: dict[str, str],
) -> list[str]:
    """Where a profile's declared binding model, fabric entries and failure-condition meanings disagree with what
    the driver's slices publish (condition names come from the slices: a declared one they never use is a typo or
    a wrong profile)."""
    fabric = [(s, d) for s in fabric_slices(slices) for d in s["spec"].get("devices") or []]
    if not fabric:
        return ["no fabric pool is published (no slice without nodeName has devices with binding conditions)"]
    driver = fabric[0][0]["spec"]["driver"]
    out = []
    published = {t for _, d in fabric for t in d.get("bindingFailureConditions") or []}
    for ctype, meaning in sorted(failure_conditions.items()):
        if ctype not in published:
            out.append(f"failureConditions names {ctype} ({meaning}); the fabric devices' are {sorted(published)}")
    if binding_model == "reschedule-to-local":
        lacking = [
            d["name"]
            for _, d in fabric
            if not {t for t, m in failure_conditions.items() if m == "reschedule"}
            & set(d.get("bindingFailureConditions") or [])
        ]
        if lacking:
            out.append(
                f"bindingModel reschedule-to-local, but {len(lacking)} fabric devices (e.g. {lacking[0]}) "
                "publish no failure condition that the profile declares to mean reschedule"
            )
    with_identity = [d["name"] for _, d in fabric if device_identity(d, identity_attribute, driver)]
    if fabric_entries == "identified" and len(with_identity) < len(fabric):
        out.append(
            f"fabricEntries identified, but {len(fabric) - len(with_identity)} of {len(fabric)} fabric devices "
            f"carry no {identity_attribute}"
        )
    if fabric_entries == "counted":
        if with_identity:
            out.append(f"fabricEntries counted, but fabric devices carry {identity_attribute}: {with_identity[:3]}")
        no_model = [d["name"] for _, d in fabric if not device_identity(d, model_attribute, driver)]
        if no_model:
            out.append(
                f"fabricEntries counted, but {len(no_model)} fabric devices (e.g. {no_model[0]}) carry no "
                f"{model_attribute} (modelAttribute)"
            )
    return out


def identity_of(slices: list[dict[str, Any]], attribute: str) -> dict[tuple[str, str], str]:
    """(pool, device) -> physical identity, read from the identity attribute of every published device."""
    out = {}
    for s in slices:
        for d in s["spec"].get("devices") or []:
            value = (d.get("attributes") or {}).get(attribute)
            if value:
                out[(s["spec"]["pool"]["name"], d["name"])] = str(next(iter(value.values())))
    return out


def tainted_by_rule(rules: list[dict[str, Any]], driver: str, pool: str, device: str) -> bool:
    """Whether a DeviceTaintRule with a NoSchedule/NoExecute taint selects this device."""
    for rule in rules:
        spec = rule.get("spec") or {}
        if (spec.get("taint") or {}).get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        sel = spec.get("deviceSelector") or {}
        if all(sel.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool), ("device", device))):
            return True
    return False


def post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a JSON body (fault injector); HTTP errors raise urllib.error.HTTPError with the server's answer."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with endpoints.urlopen(request, timeout=10) as response:
        return json.load(response)


def allocation_key(claim: dict[str, Any]) -> tuple[tuple[str, str, str], ...] | None:
    """(pool, device, node) of each result of the claim's allocation; None when it is not allocated."""
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return None
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    nodes = sorted({v for t in terms for f in t.get("matchFields") or [] for v in f.get("values") or []})
    node = ",".join(nodes)
    return tuple((r["pool"], r["device"], node) for r in (allocation.get("devices") or {}).get("results") or [])


def result_key(result: dict[str, Any]) -> tuple[str, str, str]:
    """(driver, pool, device) of an allocation result: the key of its status.devices entry."""
    return (result["driver"], result["pool"], result["device"])


def allocation_results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of the claim's allocation; empty when it is not allocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return (allocation.get("devices") or {}).get("results") or []


def device_conditions(claim: dict[str, Any], result: dict[str, Any]) -> dict[str, str]:
    """type -> status of the conditions in status.devices for one allocation result."""
    for entry in (claim.get("status") or {}).get("devices") or []:
        if result_key(entry) == result_key(result):
            return {c["type"]: c["status"] for c in entry.get("conditions") or []}
    return {}


# Beyond the promised attach time: the scheduler's 5 s PreBind poll, one binding-timeout retry and one
# controller restart by IMP-8 (it runs side by side with the other scenarios), on a loaded 2-core machine.
BIND_SLACK_S = 60.0
