"""Every object of a cluster, found through API discovery: for checking that a run leaves nothing behind.

Each listable resource of each served group (its preferred version: one object is served under several versions)
is listed cluster-wide. An object is known by resource, namespace and name; its fingerprint is its uid (deleted and
created again is a difference) and its labels (a label left on a Node is a difference). Status, annotations and
resourceVersion are not compared: the control plane rewrites them on its own (node heartbeats, controllers'
bookkeeping annotations).

CHURNED resources are left out because the control plane creates, renews and deletes their objects by itself,
whatever a run does: Events (every component records them; they expire after an hour), Leases (node heartbeats,
leader election, apiserver identity, renewed every few seconds and garbage-collected) and Endpoints/EndpointSlices
(the apiserver rewrites those of the `kubernetes` Service; the EndpointSlice mirroring controller follows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

CHURNED = frozenset(
    {
        ("", "events"),
        ("events.k8s.io", "events"),
        ("coordination.k8s.io", "leases"),
        ("coordination.k8s.io", "leasecandidates"),
        ("", "endpoints"),
        ("discovery.k8s.io", "endpointslices"),
    }
)


@dataclass(frozen=True, order=True)
class Key:
    resource: str  # plural.group ("pods" for the core group)
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.resource} {self.namespace + '/' if self.namespace else ''}{self.name}"


Inventory = dict[Key, tuple[str, tuple[tuple[str, str], ...]]]  # key -> (uid, sorted labels)


def _get(api: client.ApiClient, path: str) -> Any:
    method, url, headers, _, _ = api.param_serialize("GET", path, auth_settings=["BearerToken"])
    response = api.call_api(method, url, headers)
    response.read()
    if response.status != 200:
        raise ApiException(status=response.status, reason=f"GET {path}: {response.reason}")
    return json.loads(response.data)


def _group_versions(api: client.ApiClient) -> list[tuple[str, str]]:
    """(group, path prefix) of the core group and of every other group's preferred version."""
    found = [("", "/api/v1")]
    for group in _get(api, "/apis")["groups"]:
        found.append((group["name"], f"/apis/{group['preferredVersion']['groupVersion']}"))
    return found


def listable(api: client.ApiClient) -> list[tuple[str, str, str]]:
    """(group, resource, list path) of every listable top-level resource, CHURNED ones left out."""
    resources = []
    for group, prefix in _group_versions(api):
        for res in _get(api, prefix)["resources"]:
            name = res["name"]
            if "/" in name or "list" not in res.get("verbs", []) or (group, name) in CHURNED:
                continue
            resources.append((group, name, f"{prefix}/{name}"))
    return resources


def inventory(api: client.ApiClient) -> Inventory:
    """Every object of every listable resource, cluster-wide (namespaced resources across all namespaces)."""
    objects: Inventory = {}
    for group, name, path in listable(api):
        resource = f"{name}.{group}" if group else name
        for item in _get(api, path).get("items") or []:
            meta = item.get("metadata") or {}
            key = Key(resource, meta.get("namespace") or "", meta.get("name") or "")
            objects[key] = (meta.get("uid") or "", tuple(sorted((meta.get("labels") or {}).items())))
    return objects


def difference(before: Inventory, after: Inventory) -> list[str]:
    """What changed, one line per object: added, removed, replaced (new uid) or relabelled."""
    lines = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if old is None:
            lines.append(f"added {key}")
        elif new is None:
            lines.append(f"removed {key}")
        elif old[0] != new[0]:
            lines.append(f"replaced {key} (uid {old[0]} -> {new[0]})")
        else:
            lines.append(f"relabelled {key}: {dict(old[1])} -> {dict(new[1])}")
    return lines
