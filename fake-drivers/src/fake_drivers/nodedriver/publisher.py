"""Keeps each node's pool (one slice, several past 128 devices) equal to what the policy says; removes them all
on shutdown."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from ..dra import MANAGED_BY, RESOURCE_GROUP, RESOURCE_VERSION, identity
from ..pools import PLURAL, brief, delete_slice, write_pool
from .config import NodeDriverConfig
from .slices import MANAGER, AttachedDevice, Policy, desired_devices, devices_of, node_template

log = logging.getLogger(__name__)


@dataclass
class Publisher:
    api: client.CustomObjectsApi
    config: NodeDriverConfig
    policy: Policy
    published: dict[str, list[str]] = field(default_factory=dict)  # node -> device names, for the log
    # Per-node mode (--node): the one node served and its Node's uid (the slices' owner); None: every node.
    node: str | None = None
    node_uid: str | None = None

    def _list(self, **selectors: str) -> list[dict[str, Any]]:
        return self.api.list_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, **selectors)["items"]

    def own_slices(self) -> dict[str, list[dict[str, Any]]]:
        """This driver's node slices (a pool may span several), by node name."""
        fields = f"spec.driver={self.config.driver}" + (f",spec.nodeName={self.node}" if self.node else "")
        items = self._list(label_selector=f"{MANAGED_BY}={MANAGER}", field_selector=fields)
        by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for item in items:
            by_node[item["spec"]["nodeName"]].append(item)
        return by_node

    def fabric_pool_uuids(self) -> set[str]:
        """Identities that a slice of this driver without nodeName (the fabric pool) still offers."""
        items = self._list(field_selector=f"spec.driver={self.config.driver}")
        return {
            ident
            for item in items
            if not item["spec"].get("nodeName")
            for device in item["spec"].get("devices") or []
            if (ident := identity(device))
        }

    def sync(self, attached: list[AttachedDevice], existing: frozenset[str] | None = None) -> int:
        """Bring every node's slice up to date; returns how many slices were written. `existing`: the cluster's
        nodes (None: unknown, every configured node is served). A configured node that does not exist gets no slice,
        and the slices of a node that was deleted are removed, as the kubelet's owner reference has the garbage
        collector do for a real plugin: a device published for a node that is gone is offered where no pod can run."""
        current = self.own_slices()
        served = [n for n in self.config.nodes if existing is None or n in existing]
        # The fabric pool is read only when a served node has a hot-plugged device to check against it: one read of
        # the (large) fabric slices per poll and node would cost a per-node plugin on every node for nothing.
        hot = any(dev.node in served for dev in attached)
        deny = self.fabric_pool_uuids() if self.policy.republish and self.policy.deny_list and hot else set()
        writes = 0
        for node in served:
            devices = desired_devices(self.config, node, attached, deny, self.policy)
            template = node_template(self.config.driver, node, self.node_uid)
            generation = write_pool(self.api, current.get(node, []), template, devices, devices_of)
            if generation is None:
                continue
            writes += 1
            self._log_change(node, devices, generation)
        for node in set(current) - set(served):  # a node deleted or dropped from the config: never leave it stale
            self.published.pop(node, None)
            for item in current[node]:
                delete_slice(self.api, item["metadata"]["name"])
                writes += 1
        return writes

    def _log_change(self, node: str, devices: list[dict[str, Any]], generation: int) -> None:
        names = [d["name"] for d in devices]
        before = self.published.get(node, [])
        added, removed = sorted(set(names) - set(before)), sorted(set(before) - set(names))
        changes = f"+{brief(added)} -{brief(removed)}"
        log.info("node %s: pool generation %d, %s (%d devices)", node, generation, changes, len(names))
        self.published[node] = names

    def remove_all(self) -> None:
        for items in self.own_slices().values():
            for item in items:
                delete_slice(self.api, item["metadata"]["name"])
        log.info("removed the slices of %d nodes", len(self.config.nodes))
