"""Manifests the scenarios create, as plain dicts for the real apiserver to validate (resource.k8s.io/v1)."""

from __future__ import annotations

import uuid
from typing import Any

RESOURCE_API = "resource.k8s.io/v1"
MAX_SLICE_DEVICES = 128  # resource.k8s.io/v1: devices per ResourceSlice


SUITE_DRIVER_DOMAIN = "conformance.example.com"  # every driver the suite itself plays ends with it


def unique_driver(purpose: str) -> str:
    """A DRA driver name no other test uses, so tests cannot see each other's devices (`purpose`: who plays it)."""
    return f"{purpose}-{uuid.uuid4().hex[:8]}.{SUITE_DRIVER_DOMAIN}"


def device(name: str, *, model: str = "fake-gpu", uuid_: str | None = None, **fields: Any) -> dict[str, Any]:
    """A device with the identity (uuid) and model attributes the profile contract speaks of."""
    attributes = {"model": {"string": model}, "uuid": {"string": uuid_ or str(uuid.uuid4())}}
    return {"name": name, "attributes": attributes, **fields}


def resource_slice(
    name: str,
    driver: str,
    pool: str,
    devices: list[dict[str, Any]],
    *,
    node: str | None = None,
    all_nodes: bool = False,
    generation: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
        "devices": devices,
    }
    if node:
        spec["nodeName"] = node
    elif all_nodes:
        spec["allNodes"] = True
    return {"apiVersion": RESOURCE_API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def node_local_slices(driver: str, nodes: list[str], per_node: int) -> list[dict[str, Any]]:
    """Node-local pools of `per_node` devices (no binding conditions), split into slices of at most
    MAX_SLICE_DEVICES: SCALE-1's baseline, and every node's own slice in `make scale`."""
    out = []
    for node in nodes:
        parts = [range(i, min(i + MAX_SLICE_DEVICES, per_node)) for i in range(0, per_node, MAX_SLICE_DEVICES)]
        for n, part in enumerate(parts):
            out.append(
                {
                    "apiVersion": RESOURCE_API,
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{driver}-{node}-{n}"},
                    "spec": {
                        "driver": driver,
                        "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": len(parts)},
                        "devices": [device(f"dev-{i}") for i in part],
                    },
                }
            )
    return out


def device_class(name: str, driver: str) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def claim_spec(device_class_name: str, count: int = 1) -> dict[str, Any]:
    """One request, named `dev`, for `count` devices of the class."""
    request = {"name": "dev", "exactly": {"deviceClassName": device_class_name, "count": count}}
    return {"devices": {"requests": [request]}}


def claim_template(name: str, device_class_name: str, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim_spec(device_class_name, count)},
    }


def requests_claim_template(name: str, requests: list[tuple[str, str, int]]) -> dict[str, Any]:
    """A claim template with several requests: (request name, device class, count) each; the pod's one claim
    (named `dev`) covers them all."""
    spec = [{"name": r, "exactly": {"deviceClassName": c, "count": n}} for r, c, n in requests]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": spec}}},
    }


def resource_claim(name: str, device_class_name: str, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": claim_spec(device_class_name, count),
    }


def pod_with_claim_template(name: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "dev"}]}}
            ],
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": template}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def pod_with_claim(name: str, claim: str, node: str) -> dict[str, Any]:
    """A pod pinned to `node` that uses the existing ResourceClaim `claim` (shared by every pod that names it)."""
    pod = pod_with_claim_template(name, "")
    pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim}]
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def pinned_pod(name: str, template: str, node: str) -> dict[str, Any]:
    """A pod with one claim from `template`, pinned to `node` (nodeSelector on the hostname label)."""
    pod = pod_with_claim_template(name, template)
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


# The scheduling gate the suite puts on a pod it must keep from the scheduler until a moment it chooses (removed by
# a JSON patch: a gate can only be removed, never added back).
SUITE_GATE = "dra-conformance.example.com/held"


def held_at_gate(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod held at the suite's scheduling gate: its claim stays pending until the gate is lifted."""
    pod["spec"]["schedulingGates"] = [{"name": SUITE_GATE}]
    return pod
