"""Reading what an implementation publishes, without knowing its names: slices, selectors, identities, probe."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from kubernetes import client

from conformance.cluster import Cluster


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
        if not s["spec"].get("nodeName") and any(d.get("bindingConditions") for d in s["spec"].get("devices", []))
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


def identity_of(slices: list[dict[str, Any]], attribute: str) -> dict[tuple[str, str], str]:
    """(pool, device) -> physical identity, read from the identity attribute of every published device."""
    out = {}
    for s in slices:
        for d in s["spec"].get("devices", []):
            value = d.get("attributes", {}).get(attribute, {})
            if value:
                out[(s["spec"]["pool"]["name"], d["name"])] = str(next(iter(value.values())))
    return out


def probe_attachments(url: str) -> dict[str, str]:
    """The fabric probe: physical identity -> node, for devices the fabric reports attached (done)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    return {a["device"]: a["node"] for a in body.get("attachments", []) if a.get("state", "attached") == "attached"}
