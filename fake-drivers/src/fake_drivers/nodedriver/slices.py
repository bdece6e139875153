"""What each node's ResourceSlice should hold: pure functions, no I/O, so the policy is unit-testable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dra import MANAGED_BY, RESOURCE_GROUP, RESOURCE_VERSION, Device, slice_name
from .config import NodeDriverConfig

MANAGER = "fake-node-driver"
NODE_LABEL = "fake-drivers.example.com/node"


@dataclass(frozen=True)
class AttachedDevice(Device):
    """A fabric device the fabric manager reports as attached (done, not in progress) to `node`."""

    node: str = ""


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
    devices = [d.entry() for d in config.local[node]]
    if policy.republish:
        devices += [
            dev.entry()
            for dev in attached
            if dev.node == node and not (policy.deny_list and dev.uuid in fabric_pool_uuids)
        ]
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
