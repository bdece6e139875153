"""Keeps each node's ResourceSlice equal to what the policy says, and removes them all on shutdown."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..dra import MANAGED_BY, RESOURCE_GROUP, RESOURCE_VERSION, identity
from .config import NodeDriverConfig
from .slices import MANAGER, AttachedDevice, Policy, desired_devices, next_generation, slice_manifest

log = logging.getLogger(__name__)
PLURAL = "resourceslices"


@dataclass
class Publisher:
    api: client.CustomObjectsApi
    config: NodeDriverConfig
    policy: Policy
    published: dict[str, list[str]] = field(default_factory=dict)  # node -> device names, for the log

    def _list(self, **selectors: str) -> list[dict[str, Any]]:
        return self.api.list_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, **selectors)["items"]

    def own_slices(self) -> dict[str, dict[str, Any]]:
        """This driver's node slices, by node name."""
        items = self._list(label_selector=f"{MANAGED_BY}={MANAGER}", field_selector=f"spec.driver={self.config.driver}")
        return {item["spec"]["nodeName"]: item for item in items}

    def fabric_pool_uuids(self) -> set[str]:
        """Identities that a slice of this driver without nodeName (the fabric pool) still offers."""
        items = self._list(field_selector=f"spec.driver={self.config.driver}")
        return {
            ident
            for item in items
            if not item["spec"].get("nodeName")
            for device in item["spec"].get("devices", [])
            if (ident := identity(device))
        }

    def sync(self, attached: list[AttachedDevice]) -> int:
        """Bring every node's slice up to date; returns how many slices were written."""
        current = self.own_slices()
        deny = self.fabric_pool_uuids() if self.policy.republish and self.policy.deny_list else set()
        writes = 0
        for node in self.config.nodes:
            devices = desired_devices(self.config, node, attached, deny, self.policy)
            generation = next_generation(current.get(node), devices)
            if generation is None:
                continue
            body = slice_manifest(self.config.driver, node, devices, generation)
            if node in current:
                body["metadata"]["resourceVersion"] = current[node]["metadata"]["resourceVersion"]
                self.api.replace_cluster_custom_object(
                    RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, body["metadata"]["name"], body
                )
            else:
                self.api.create_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, body)
            writes += 1
            self._log_change(node, devices, generation)
        for node in set(current) - set(self.config.nodes):  # a node dropped from the config: never leave it stale
            self._delete(current[node]["metadata"]["name"])
            writes += 1
        return writes

    def _log_change(self, node: str, devices: list[dict[str, Any]], generation: int) -> None:
        names = [d["name"] for d in devices]
        before = self.published.get(node, [])
        added, removed = sorted(set(names) - set(before)), sorted(set(before) - set(names))
        log.info("node %s: pool generation %d, +%s -%s (%d devices)", node, generation, added, removed, len(names))
        self.published[node] = names

    def _delete(self, name: str) -> None:
        try:
            self.api.delete_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def remove_all(self) -> None:
        for item in self.own_slices().values():
            self._delete(item["metadata"]["name"])
        log.info("removed the slices of %d nodes", len(self.config.nodes))
