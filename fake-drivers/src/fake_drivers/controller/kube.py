"""Writes to the Kubernetes API: pool slices, taint rules, claim conditions. Conflicts are retried with backoff,
each retry re-reading the object and re-checking that the write still applies."""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from ..dra import MANAGED_BY, RESOURCE_GROUP, RESOURCE_VERSION
from ..pools import delete_slice, is_current, write_pool
from .decide import Assignment, ConditionWrite, TaintCreate
from .model import Claim, CountedEntry, FabricDevice
from .objects import (
    fabric_device_entry,
    pool_labels,
    pool_slices,
    pool_template,
    slice_content,
    still_applies,
    taint_rule,
    with_assignment,
    with_condition,
)
from .settings import DRIVER_LABEL, MANAGER, Settings

log = logging.getLogger(__name__)

SLICES, CLAIMS, TAINTS = "resourceslices", "resourceclaims", "devicetaintrules"


def _conflict(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 409


# Optimistic concurrency: the scheduler and others write the same objects; a 409 means "read again".
on_conflict = retry(
    retry=retry_if_exception(_conflict),
    stop=stop_after_attempt(8),
    wait=wait_random_exponential(multiplier=0.05, max=2.0),
    reraise=True,
)


class Kube:
    def __init__(self, api: client.ApiClient, settings: Settings, taint_version: str = RESOURCE_VERSION) -> None:
        self.api = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.settings = settings
        self.taint_version = taint_version  # DeviceTaintRule is served as v1 only from 1.37

    # --- reads ----------------------------------------------------------------------------------------------

    def list_claims(self) -> list[dict[str, Any]]:
        return self.api.list_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, CLAIMS)["items"]

    def node_names(self) -> frozenset[str]:
        """The cluster's nodes (RBAC: list nodes), to tell a device left on a deleted node."""
        return frozenset(n.metadata.name for n in self.core.list_node().items)

    def own_selector(self) -> str:
        return f"{MANAGED_BY}={MANAGER},{DRIVER_LABEL}={self.settings.driver}"

    # --- fabric pools ---------------------------------------------------------------------------------------

    def sync_pool(
        self, fabric: str, devices: list[FabricDevice | CountedEntry], cached: list[dict[str, Any]]
    ) -> int | None:
        """Make the fabric's pool slices list exactly `devices`; returns the new generation, None if unchanged.

        `cached` (the watch cache's slices of this pool) saves a read when nothing changed; a write lists the
        pool's slices fresh.
        """
        if cached and is_current(cached, pool_slices(self.settings, fabric, devices, 0), slice_content):
            return None
        return self._write_pool(fabric, devices)

    @on_conflict
    def _write_pool(self, fabric: str, devices: list[FabricDevice | CountedEntry]) -> int | None:
        # The generation grows on every content change, so the scheduler can tell the current pool from an old one.
        selector = ",".join(f"{k}={v}" for k, v in pool_labels(self.settings, fabric).items())
        published = self.api.list_cluster_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, SLICES, label_selector=selector
        )["items"]
        entries = [fabric_device_entry(self.settings, d) for d in devices]
        return write_pool(self.api, published, pool_template(self.settings, fabric), entries, slice_content)

    # --- taint rules ----------------------------------------------------------------------------------------

    def create_taint(self, taint: TaintCreate, now: float) -> bool:
        """True once the rule exists (created now or already there)."""
        try:
            self.api.create_cluster_custom_object(
                RESOURCE_GROUP, self.taint_version, TAINTS, taint_rule(self.settings, taint, now, self.taint_version)
            )
        except ApiException as exc:
            if exc.status != 409:  # AlreadyExists: made by an earlier pass or an earlier run
                raise
        return True

    def delete_taint(self, name: str) -> None:
        try:
            self.api.delete_cluster_custom_object(RESOURCE_GROUP, self.taint_version, TAINTS, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # --- clean stop ---------------------------------------------------------------------------------------

    def remove_own(self) -> tuple[int, int]:
        """Delete every fabric pool slice and taint rule this controller wrote (its labels); (slices, rules).

        For --remove-on-stop: a stack that is uninstalled must not leave its devices offered in the cluster.
        """
        own = self.own_selector()
        slices = self.api.list_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, SLICES, label_selector=own)
        for item in slices["items"]:
            delete_slice(self.api, item["metadata"]["name"])
        rules = self.api.list_cluster_custom_object(RESOURCE_GROUP, self.taint_version, TAINTS, label_selector=own)
        for item in rules["items"]:
            self.delete_taint(item["metadata"]["name"])
        return len(slices["items"]), len(rules["items"])

    # --- claim conditions -----------------------------------------------------------------------------------

    def write_condition(self, write: ConditionWrite, now: float, cached: dict[str, Any] | None = None) -> str:
        """Set one condition in the claim's status.devices; 'written', 'unchanged' or 'stale'.

        Replaced with the resourceVersion of the object it was checked on: a condition can never land on an
        allocation other than the one it was decided for (the scheduler may have deallocated and allocated again).
        `cached` (the watch cache's copy the decision was made from) saves the read: one request per write, which
        matters with a thousand claims waiting; a 409 says it changed since, and the write reads fresh.
        """
        if cached is not None and cached["metadata"].get("resourceVersion") == write.claim.resource_version:
            try:
                return self._set_condition(cached, write, now)
            except ApiException as exc:
                if not _conflict(exc):
                    raise
        return self._write_condition_fresh(write, now)

    @on_conflict
    def _write_condition_fresh(self, write: ConditionWrite, now: float) -> str:
        ns, name = write.claim.namespace, write.claim.name
        try:
            claim = self.api.get_namespaced_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, ns, CLAIMS, name)
        except ApiException as exc:
            if exc.status == 404:
                return "stale"
            raise
        return self._set_condition(claim, write, now)

    def _set_condition(self, claim: dict[str, Any], write: ConditionWrite, now: float) -> str:
        """Check `claim` still holds the allocation, then replace it with the condition set (409 if it changed)."""
        if not still_applies(claim, write):
            return "stale"
        body = with_condition(claim, write, now)
        if body is None:
            return "unchanged"
        ns, name = write.claim.namespace, write.claim.name
        self.api.replace_namespaced_custom_object_status(RESOURCE_GROUP, RESOURCE_VERSION, ns, CLAIMS, name, body)
        return "written"

    @on_conflict
    def write_assignment(self, assignment: Assignment) -> str | None:
        """counted: write the entry's physical device into the claim (status.devices[].data.uuid) before the
        attach; returns the device the claim names now, None when the allocation is gone or changed."""
        ns, name = assignment.claim.namespace, assignment.claim.name
        try:
            claim = self.api.get_namespaced_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, ns, CLAIMS, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        probe = ConditionWrite(assignment.claim, assignment.result, "", "", "")
        if not still_applies(claim, probe) or Claim.from_api(claim).allocated_at != assignment.claim.allocated_at:
            return None
        body, uuid = with_assignment(claim, assignment)
        if body is not None:
            self.api.replace_namespaced_custom_object_status(RESOURCE_GROUP, RESOURCE_VERSION, ns, CLAIMS, name, body)
        return uuid
