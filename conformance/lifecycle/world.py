"""The objects a lifecycle run stages on its own cluster, and the suite playing the driver and the controller.

One fabric pool of a suite-owned driver (`bindsToNode`, a binding condition and a failure condition, reaching every
node), its DeviceClass and a claim template; pods with a claim each. The suite alone writes the binding conditions,
and only when it chooses, so "bound while its conditions are not all True" is read straight off the objects: a pod
found bound whose claim does not show every binding condition True was bound before they were (conditions are never
set back). Objects are read as the server serves them (plain dicts), so a field the server dropped shows as absent.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_fixed

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import RESOURCE_API, claim_template, device_class, pod_with_claim_template
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import wait_for

NAMESPACE = "lifecycle"
PENDING_EVENT = "BindingConditionsPending"
# A pod is "waiting in PreBind" once its claim is allocated and reserved for it and it stayed unbound for two of
# the scheduler's polls and a second (a scheduler that does not wait binds within one poll).
HOLD_S = 2 * PREBIND_POLL_S + 1.0
# After kube-apiserver restarts, every other component's informers list again, but client-go's reflector backs off
# between attempts up to [30, 60) s, and resets its back-off only after 2 min without one (tools/cache/reflector.go,
# the same in 1.35-1.38): with two restarts in a minute, kube-controller-manager made a new pod's claim from its
# template only after 60 s (1.35.4, measured). Every wait of a lifecycle run comes after restarts.
RELIST_S = 60.0
SCHEDULE_S = 60.0 + RELIST_S  # a scheduling decision (allocation, or Unschedulable) on a loaded machine
BIND_S = 60.0

# What became of a pod (PodFate.state).
BOUND, BOUND_EARLY, WAITING, UNSCHEDULABLE, SCHEDULER_ERROR, PENDING, GONE = (
    "bound",
    "bound without its binding conditions",
    "waiting in PreBind",
    "unschedulable",
    "failing in the scheduler with an error, retried",
    "pending",
    "gone",
)


def _conflict(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 409


@dataclass(frozen=True)
class PodFate:
    """A pod as seen at one moment: its state, node, uid, claim, and the claim's allocated node and conditions."""

    pod: str
    state: str
    node: str | None = None
    uid: str | None = None
    claim: str | None = None
    allocated_node: str | None = None
    conditions_true: bool = False
    detail: str = ""

    def __str__(self) -> str:
        where = f" on {self.node}" if self.node else ""
        alloc = f", claim {self.claim} allocated on {self.allocated_node}" if self.allocated_node else ""
        return f"pod {self.pod}: {self.state}{where}{alloc}{f' ({self.detail})' if self.detail else ''}"


@dataclass
class World:
    """One lifecycle run's driver, pool and pods."""

    cluster: Cluster
    driver: str
    nodes: list[str]
    devices: int = 16
    tracker: ObjectTracker = field(init=False)
    written: dict[str, float] = field(default_factory=dict)  # claim -> when the suite set its conditions True

    def __post_init__(self) -> None:
        self.tracker = ObjectTracker(self.cluster, f"lifecycle-{int(time.time())}")

    # -- names -----------------------------------------------------------------------------------------------
    @property
    def attached(self) -> str:
        return f"{self.driver}/attached"

    @property
    def failed(self) -> str:
        return f"{self.driver}/failed"

    @property
    def slice_name(self) -> str:
        return f"{self.driver}-fabric"

    @property
    def device_class(self) -> str:
        return self.driver.split(".")[0]

    # -- the driver ------------------------------------------------------------------------------------------
    def fabric_slice(self, name: str | None = None, driver: str | None = None) -> dict[str, Any]:
        """The fabric pool as the driver publishes it: every device bindsToNode with binding and failure conditions,
        reaching every node (allNodes)."""
        devices = [
            {
                "name": f"dev-{i}",
                "attributes": {"name": {"string": f"dev-{i}"}},  # a pod that must get one device selects it by this
                "bindsToNode": True,
                "bindingConditions": [self.attached],
                "bindingFailureConditions": [self.failed],
            }
            for i in range(self.devices)
        ]
        spec = {
            "driver": driver or self.driver,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": devices,
        }
        return {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceSlice",
            "metadata": {"name": name or self.slice_name},
            "spec": spec,
        }

    def setup(self) -> None:
        self.tracker.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        self.tracker.create(device_class(self.device_class, self.driver))
        self.tracker.create(claim_template("dev", self.device_class), NAMESPACE)
        self.tracker.create(self.fabric_slice())

    def pod(self, name: str, device: str | None = None) -> None:
        """A pod with a claim of its own (from the template), or for exactly `device` of the pool."""
        template = "dev"
        if device is not None:
            template = f"dev-{name}"
            manifest = claim_template(template, self.device_class)
            selector = f'device.attributes["{self.driver}"].name == "{device}"'
            manifest["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
                {"cel": {"expression": selector}}
            ]
            self.tracker.create(manifest, NAMESPACE)
        self.tracker.create(pod_with_claim_template(name, template), NAMESPACE)

    def withdraw(self, device: str) -> None:
        """Republish the fabric pool without `device` (a new generation): the KEP's way to keep a failed device from
        being picked again."""
        api = self.cluster.kind(RESOURCE_API, "ResourceSlice")
        current = api.get(name=self.slice_name).to_dict()
        current["spec"]["devices"] = [d for d in current["spec"]["devices"] if d["name"] != device]
        current["spec"]["pool"]["generation"] += 1
        api.replace(body=current)

    def delete_pod(self, name: str) -> None:
        try:
            self.cluster.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # -- reading what the server serves -------------------------------------------------------------------------
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.cluster.api)

    def read_slice(self, name: str | None = None) -> dict[str, Any] | None:
        try:
            return self._custom().get_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", name or self.slice_name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def read_claim(self, name: str) -> dict[str, Any] | None:
        try:
            return self._custom().get_namespaced_custom_object(
                "resource.k8s.io", "v1", NAMESPACE, "resourceclaims", name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def claims(self) -> list[dict[str, Any]]:
        return self._custom().list_namespaced_custom_object("resource.k8s.io", "v1", NAMESPACE, "resourceclaims")[
            "items"
        ]

    def read_pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self.cluster.api.sanitize_for_serialization(self.cluster.core.read_namespaced_pod(name, NAMESPACE))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def claim_of(self, pod: dict[str, Any]) -> str | None:
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("resourceClaimName"):
                return str(status["resourceClaimName"])
        return None

    def pending_events(self, pod: str) -> int:
        events = self.cluster.core.list_namespaced_event(
            NAMESPACE, field_selector=f"involvedObject.name={pod},reason={PENDING_EVENT}"
        ).items
        return sum(e.count or 1 for e in events)

    # -- what a pod's state is -------------------------------------------------------------------------------------
    def fate(self, name: str) -> PodFate:
        """The pod's state now, read from the pod and its claim (never from the suite's own expectations)."""
        pod = self.read_pod(name)
        if pod is None:
            return PodFate(name, GONE)
        node = (pod.get("spec") or {}).get("nodeName")
        uid = pod["metadata"]["uid"]
        claim_name = self.claim_of(pod)
        claim = self.read_claim(claim_name) if claim_name else None
        alloc_node = allocated_node(claim) if claim else None
        true = conditions_true(claim) if claim else False
        if node:
            # The suite is the only writer of conditions: bound before it wrote them is bound without them, whether
            # the claim shows them (a scheduler that did not wait) or not (a server that dropped them).
            if claim_name in self.written:
                return PodFate(name, BOUND, node, uid, claim_name, alloc_node, true)
            kept = (
                "its allocation lists the binding conditions"
                if has_binding_conditions(claim)
                else ("its allocation has no binding conditions: dropped when written")
            )
            return PodFate(name, BOUND_EARLY, node, uid, claim_name, alloc_node, true, kept)
        reserved = claim is not None and any(
            r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or []
        )
        if alloc_node and reserved:
            return PodFate(name, WAITING, None, uid, claim_name, alloc_node, true)
        for cond in (pod.get("status") or {}).get("conditions") or []:
            # Unschedulable: no node fits; SchedulerError: a plugin failed (e.g. a write refused), the pod is retried.
            reason = {"Unschedulable": UNSCHEDULABLE, "SchedulerError": SCHEDULER_ERROR}.get(cond.get("reason") or "")
            if cond.get("type") == "PodScheduled" and reason:
                return PodFate(name, reason, None, uid, claim_name, None, False, str(cond.get("message") or "")[:300])
        return PodFate(name, PENDING, None, uid, claim_name, alloc_node, true, _pending_detail(pod, claim_name, claim))

    def settle(self, name: str, timeout: float = SCHEDULE_S) -> PodFate:
        """Wait for the scheduler's decision on a pod: bound, unschedulable, or allocated and then still unbound for
        HOLD_S (waiting in PreBind); return what it came to."""
        first = wait_for(
            lambda: self.fate(name),
            lambda f: f.state not in (PENDING,),
            timeout=timeout,
            expected=f"a scheduling decision for pod {name} (bound, waiting in PreBind, unschedulable or an error)",
            describe=str,
            max_interval=1.0,
        )
        if first.state != WAITING:
            return first
        deadline = time.monotonic() + HOLD_S
        while time.monotonic() < deadline:
            now = self.fate(name)
            if now.state != WAITING:
                return now
            time.sleep(0.5)
        return self.fate(name)

    # -- the controller --------------------------------------------------------------------------------------
    @retry(retry=retry_if_exception(_conflict), stop=stop_after_attempt(10), wait=wait_fixed(0.1), reraise=True)
    def set_conditions(self, claim: str, types: list[str] | None = None, message: str = "attached") -> dict[str, Any]:
        """Set the binding condition (or `types`) True on every allocated device of the claim, as a controller
        does once the device is attached; returns the claim as the server stored it."""
        api = self._custom()
        obj = api.get_namespaced_custom_object("resource.k8s.io", "v1", NAMESPACE, "resourceclaims", claim)
        status = obj.setdefault("status", {})
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        entries = status.setdefault("devices", [])
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for r in results:
            entry = next((e for e in entries if (e["pool"], e["device"]) == (r["pool"], r["device"])), None)
            if entry is None:
                entry = {"driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": []}
                entries.append(entry)
            wanted = types or [self.attached]
            kept = [c for c in entry.get("conditions") or [] if c["type"] not in wanted]
            entry["conditions"] = kept + [
                {"type": t, "status": "True", "reason": "LifecycleRun", "message": message, "lastTransitionTime": now}
                for t in wanted
            ]
        stored = api.replace_namespaced_custom_object_status(
            "resource.k8s.io", "v1", NAMESPACE, "resourceclaims", claim, obj
        )
        if types is None:
            self.written.setdefault(claim, time.monotonic())
        return stored

    def bind(self, name: str) -> PodFate:
        """Play the controller for a pod waiting in PreBind: its conditions True, then wait until it is bound."""
        fate = self.fate(name)
        if fate.claim and fate.state == WAITING:
            self.set_conditions(fate.claim)
        return wait_for(
            lambda: self.fate(name),
            lambda f: f.state in (BOUND, BOUND_EARLY, GONE),
            timeout=BIND_S,
            expected=f"pod {name} bound once its binding conditions are True",
            describe=str,
            max_interval=1.0,
        )


def results_of(claim: dict[str, Any] | None) -> list[dict[str, Any]]:
    alloc = ((claim or {}).get("status") or {}).get("allocation") or {}
    return list((alloc.get("devices") or {}).get("results") or [])


def has_binding_conditions(claim: dict[str, Any] | None) -> bool:
    return any(r.get("bindingConditions") for r in results_of(claim))


def allocated_node(claim: dict[str, Any] | None) -> str | None:
    """The one node the allocation's nodeSelector names (bindsToNode), else None (not allocated, or no single node)."""
    alloc = ((claim or {}).get("status") or {}).get("allocation") or {}
    for term in (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and len(expr.get("values") or []) == 1:
                return str(expr["values"][0])
    return None


def conditions_true(claim: dict[str, Any] | None) -> bool:
    """Every binding condition of every allocated device True in the claim's status.devices (False when there are
    none to be True, or the claim is not allocated)."""
    results = results_of(claim)
    if not results or not any(r.get("bindingConditions") for r in results):
        return False
    status = {(e["pool"], e["device"]): e for e in ((claim or {}).get("status") or {}).get("devices") or []}
    for r in results:
        true = {
            c["type"]
            for c in (status.get((r["pool"], r["device"])) or {}).get("conditions") or []
            if c["status"] == "True"
        }
        if not set(r.get("bindingConditions") or []) <= true:
            return False
    return True


def _pending_detail(pod: dict[str, Any], claim_name: str | None, claim: dict[str, Any] | None) -> str:
    """Where a pending pod stands, from what the API serves: a stop on it names the step that did not happen (its claim
    not made from the template, not allocated, allocated but not reserved) and the scheduler's last word."""
    if claim_name is None:
        where = "no ResourceClaim made from its template yet (kube-controller-manager)"
    elif claim is None:
        where = f"its claim {claim_name} not found"
    elif not (claim.get("status") or {}).get("allocation"):
        where = f"its claim {claim_name} not allocated"
    else:
        where = f"its claim {claim_name} allocated, not reserved for it"
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            said = f"{cond.get('status')} {cond.get('reason') or ''} {cond.get('message') or ''}".strip()
            return f"{where}; PodScheduled {said[:200]}"
    return f"{where}; no PodScheduled condition"
