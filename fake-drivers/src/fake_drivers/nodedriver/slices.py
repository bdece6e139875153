"""What each node's ResourceSlice should hold: pure functions, no I/O, so the policy is unit-testable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dra import MANAGED_BY, RESOURCE_GROUP, RESOURCE_VERSION, device_attributes, slice_name
from .config import NodeDriverConfig

MANAGER = "fake-node-driver"
NODE_LABEL = "fake-drivers.example.com/node"


@dataclass(frozen=True)
class AttachedDevice:
    """A fabric device the fabric manager reports as attached (done, not in progress) to a node."""

    uuid: str
    name: str
    model: str
    node: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Policy:
    republish: bool = True  # advertise hot-plugged devices (seed proposal 2, real composable systems)
    deny_list: bool = False  # ... but not while the fabric pool still offers them (seed proposal 1)


def desired_devices(
    config: NodeDriverConfig,
    node: str,
    attached: list[AttachedDevice],
    fabric_pool_uuids: set[str],
    policy: Policy,
) -> list[dict[str, Any]]:
    """The devices of one node's slice, sorted by name so equal content compares equal."""
    devices = [
        {"name": d.name, "attributes": device_attributes(d.uuid, d.model, d.attributes)} for d in config.local[node]
    ]
    if policy.republish:
        for dev in attached:
            if dev.node != node or (policy.deny_list and dev.uuid in fabric_pool_uuids):
                continue
            devices.append({"name": dev.name, "attributes": device_attributes(dev.uuid, dev.model, dev.attributes)})
    return sorted(devices, key=lambda d: d["name"])


def slice_manifest(driver: str, node: str, devices: list[dict[str, Any]], generation: int) -> dict[str, Any]:
    """One slice per node: pool = node name, so each node's pool has exactly one slice."""
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(driver, node), "labels": {MANAGED_BY: MANAGER, NODE_LABEL: node}},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def next_generation(current: dict[str, Any] | None, devices: list[dict[str, Any]]) -> int | None:
    """The pool generation to write, or None when the published slice already says exactly this.

    A pool's generation must grow whenever its content changes, so consumers can tell old slices from new.
    """
    if current is None:
        return 1
    spec = current.get("spec", {})
    if spec.get("devices", []) == devices:
        return None
    return int(spec.get("pool", {}).get("generation", 0)) + 1
