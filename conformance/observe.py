"""Reading what an implementation publishes, without knowing its names: slices, selectors, identities, probe."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kubernetes import client

from conformance.cluster import Cluster

if TYPE_CHECKING:  # devices.py imports this module
    from conformance.devices import DevicePool
    from conformance.providers.base import NodeSpec


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


def fabric_only_node(pool: DevicePool, nodes: Iterable[NodeSpec], fabric_devices: int = 1) -> str | None:
    """A node without node-local devices of the driver that at least `fabric_devices` fabric devices reach."""
    local = {n for d in pool.devices.values() if d.kind == "local" for n in d.nodes}
    for spec in nodes:
        if spec.name not in local and pool.count("fabric", spec.name) >= fabric_devices:
            return spec.name
    return None


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


def taint_rules(cluster: Cluster) -> list[dict[str, Any]]:
    """Every DeviceTaintRule, in whichever version the server serves (none if it serves none)."""
    found = cluster.dynamic.resources.search(group="resource.k8s.io", kind="DeviceTaintRule")
    return found[0].get().to_dict()["items"] if found else []


def free_copies(cluster: Cluster, driver: str, attribute: str, identity: str) -> list[str]:
    """The published copies of a physical device that a scheduler could allocate right now: listed in a slice,
    not allocated to any claim, not tainted (in the slice or by a DeviceTaintRule)."""
    claims = client.CustomObjectsApi(cluster.api).list_cluster_custom_object("resource.k8s.io", "v1", "resourceclaims")
    allocated = set()
    for c in claims["items"]:
        allocation = (c.get("status") or {}).get("allocation") or {}
        allocated |= {(r["driver"], r["pool"], r["device"]) for r in allocation.get("devices", {}).get("results", [])}
    slices = driver_slices(cluster, driver)
    identities = identity_of(slices, attribute)
    rules = taint_rules(cluster)
    free = []
    for s in slices:
        pool = s["spec"]["pool"]["name"]
        for d in s["spec"].get("devices") or []:
            if identities.get((pool, d["name"])) != identity or (driver, pool, d["name"]) in allocated:
                continue
            if not d.get("taints") and not tainted_by_rule(rules, driver, pool, d["name"]):
                free.append(f"{s['metadata']['name']}:{d['name']}")
    return free
