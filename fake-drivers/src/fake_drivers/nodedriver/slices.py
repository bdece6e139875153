"""What each node's pool should hold: pure functions, no I/O, so the policy is unit-testable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dra import MANAGED_BY, RESOURCE_GROUP, RESOURCE_VERSION, Device, slice_name
from ..pools import pool_bodies
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


def node_template(driver: str, node: str, node_uid: str | None = None) -> dict[str, Any]:
    """What every slice of a node's pool shares: pool = node name, nodeName = node; with the Node's uid, owned by it
    (as a kubelet plugin's slices are: the garbage collector removes them with the Node)."""
    metadata: dict[str, Any] = {"name": slice_name(driver, node), "labels": {MANAGED_BY: MANAGER, NODE_LABEL: node}}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node}},
    }


def node_slices(driver: str, node: str, devices: list[dict[str, Any]], generation: int) -> list[dict[str, Any]]:
    """A node's pool: one slice, or as many as its devices need (at most 128 each)."""
    return pool_bodies(node_template(driver, node), devices, generation)


def devices_of(slice_: dict[str, Any]) -> Any:
    """What decides whether a published slice is current: its devices (1.34 returns an empty list as null)."""
    return slice_.get("spec", {}).get("devices") or []
