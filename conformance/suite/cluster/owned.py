"""A DRA driver the suite owns, for the scheduler requirements (SCH-*).

The suite publishes the driver's pools (node-local and fabric) and itself plays the composable controller: it writes
the binding conditions on the claims, when it chooses. So SCH-* certify kube-scheduler of any cluster (local, kind,
existing) with no implementation at all, and every moment that a requirement compares is one the suite caused and
knows the etcd revision of. Each scenario gets a driver name of its own, so scenarios never see each other's devices.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_fixed

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import RESOURCE_API, device_class, pod_with_claim_template, unique_driver
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.observe.views import SCHEDULE_S, Binding, History
from conformance.suite.context import ClusterContext
from conformance.suite.gaps import skip_if_binding_timeout_fixed

# The scheduler's PreBind re-reads the claim every PREBIND_POLL_S (KEP-5007). A pod that must NOT bind
# is watched for two polls and a second: a scheduler that bound on a partial set of conditions would have done so.
HOLD_S = 2 * PREBIND_POLL_S + 1.0
PENDING_EVENT = "BindingConditionsPending"
INJECTED_REASON = "ConformanceInjectedFailure"


def usable_nodes(cluster: Cluster) -> list[str]:
    """Nodes a test pod can be scheduled to, read live: Ready, schedulable, without NoSchedule/NoExecute taints."""
    names = []
    for node in cluster.core.list_node().items:
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        tainted = any(t.effect in ("NoSchedule", "NoExecute") for t in node.spec.taints or [])
        if ready and not tainted and not node.spec.unschedulable:
            names.append(node.metadata.name)
    return sorted(names)


HOSTNAME_LABEL = "kubernetes.io/hostname"


def node_selector(nodes: list[str]) -> dict[str, Any]:
    """Selects exactly one node by name (matchFields takes one value), whatever labels the cluster gives it."""
    [node] = nodes
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def reach_selector(cluster: Cluster, nodes: list[str]) -> dict[str, Any] | None:
    """A slice node selector reaching exactly `nodes`. A slice takes one selector term, and a field selector one node
    name, so several nodes are selected by their hostname labels, read live; None if those do not tell them apart."""
    if len(nodes) == 1:
        return node_selector(nodes)
    labels = {n.metadata.name: (n.metadata.labels or {}).get(HOSTNAME_LABEL) for n in cluster.core.list_node().items}
    values = [labels.get(n) for n in nodes]
    if None in values or len(set(values)) != len(values):
        return None
    if any(value in values for name, value in labels.items() if name not in nodes):
        return None  # another node shares one of these labels: it would be reached too
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": values}]}]}


def pinned(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """Pin through the scheduler (required node affinity on the node's name), not around it (spec.nodeName)."""
    required = node_selector([node])
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return pod


def _conflict(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 409


@dataclass
class OwnedDriver:
    """One scenario's driver: its pools, its DeviceClass, and the condition writes of its 'controller'."""

    ctx: ClusterContext
    namespace: str  # the scenario's one namespace: claims, templates and pods go there
    name: str = field(default_factory=lambda: unique_driver("sch"))
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)  # pool -> the slice as created

    @property
    def attached(self) -> str:
        return f"{self.name}/attached"

    @property
    def ready(self) -> str:
        return f"{self.name}/ready"

    @property
    def failed(self) -> str:
        return f"{self.name}/failed"

    def publish(self, pool: str, devices: list[dict[str, Any]], *, node: str | None = None, nodes: list[str]) -> None:
        """One slice for the pool: on `node` (nodeName) or reaching `nodes` (a node selector)."""
        spec: dict[str, Any] = {
            "driver": self.name,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
        if node:
            spec["nodeName"] = node
        else:
            selector = reach_selector(self.ctx.cluster, nodes)
            if selector is None:
                pytest.skip(f"the nodes {nodes} cannot be told apart by their {HOSTNAME_LABEL} labels")
            spec["nodeSelector"] = selector
        manifest = {"apiVersion": RESOURCE_API, "kind": "ResourceSlice", "metadata": {"name": f"{self.name}-{pool}"}}
        self.ctx.objects.create({**manifest, "spec": spec})
        self.pools[pool] = {**manifest, "spec": spec}

    def local_pool(self, node: str, count: int = 1, pool: str = "z-local") -> list[str]:
        """Devices without binding conditions on one node (what a node-local vendor driver publishes)."""
        names = [f"{pool}-{i}" for i in range(count)]
        self.publish(pool, [{"name": n} for n in names], node=node, nodes=[])
        return names

    def fabric_pool(
        self, nodes: list[str], count: int = 1, pool: str = "a-fabric", conditions: tuple[str, ...] | None = None
    ) -> list[str]:
        """Fabric devices reaching `nodes`: bindsToNode, binding conditions, a failure condition."""
        names = [f"{pool}-{i}" for i in range(count)]
        binding = list(conditions or (self.attached,))
        devices = [
            {"name": n, "bindsToNode": True, "bindingConditions": binding, "bindingFailureConditions": [self.failed]}
            for n in names
        ]
        self.publish(pool, devices, nodes=nodes)
        return names

    def withdraw(self, pool: str, device: str) -> None:
        """Republish the pool without `device` (a new generation): one way the KEP names to keep a failed device
        from being picked again."""
        sl = self.pools[pool]
        spec = sl["spec"]
        spec["devices"] = [d for d in spec["devices"] if d["name"] != device]
        spec["pool"]["generation"] += 1
        api = self.ctx.cluster.kind(RESOURCE_API, "ResourceSlice")
        current = api.get(name=sl["metadata"]["name"]).to_dict()
        current["spec"] = spec
        api.replace(body=current)

    def device_class(self) -> str:
        name = f"{self.name.split('.')[0]}-{self.ctx.objects.run_id}"
        self.ctx.objects.create(device_class(name, self.name))
        return name

    def claim_template(self, name: str = "dev", count: int = 1) -> str:
        request = {"name": "dev", "exactly": {"deviceClassName": self.device_class(), "count": count}}
        template = {"spec": {"devices": {"requests": [request]}}}
        manifest = {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate", "metadata": {"name": name}}
        self.ctx.objects.create({**manifest, "spec": template}, self.namespace)
        return name

    def pod(self, name: str, template: str, node: str | None = None) -> None:
        pod = pod_with_claim_template(name, template)
        self.ctx.objects.create(pinned(pod, node) if node else pod, self.namespace)

    @retry(retry=retry_if_exception(_conflict), stop=stop_after_attempt(10), wait=wait_fixed(0.1), reraise=True)
    def set_conditions(
        self,
        claim: str,
        devices: list[tuple[str, str]],
        types: list[str],
        *,
        reason: str = "ConformanceSuite",
        message: str = "set by the conformance suite playing the controller",
    ) -> int:
        """Set `types` True on the claim's status.devices entries of `devices` ((pool, device)); return the etcd
        revision of the write, so a binding can be ordered against it exactly."""
        api = client.CustomObjectsApi(self.ctx.cluster.api)
        ns = self.namespace
        obj = api.get_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaims", claim)
        status = obj.setdefault("status", {})
        entries = status.setdefault("devices", [])
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for pool, device in devices:
            entry = next((e for e in entries if (e["pool"], e["device"]) == (pool, device)), None)
            if entry is None:
                entry = {"driver": self.name, "pool": pool, "device": device, "conditions": []}
                entries.append(entry)
            kept = [c for c in entry.get("conditions") or [] if c["type"] not in types]
            new = [
                {"type": t, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
                for t in types
            ]
            entry["conditions"] = kept + new
        written = api.replace_namespaced_custom_object_status("resource.k8s.io", "v1", ns, "resourceclaims", claim, obj)
        return int(written["metadata"]["resourceVersion"])


def pending_events(history: History) -> dict[str, int]:
    """Pod name -> how many BindingConditionsPending events the scheduler emitted for it (from the record)."""
    counts: dict[str, int] = {}
    for e in history.k8s_events():
        if e["reason"] == PENDING_EVENT and e["object"]["kind"] == "Pod":
            counts[e["object"]["name"]] = counts.get(e["object"]["name"], 0) + (e["count"] or 1)
    return counts


def wait_pending(history: History, pods: list[str]) -> dict[str, int]:
    """Wait until every pod has a BindingConditionsPending event; return what was seen (also when not all came)."""
    try:
        return wait_for(
            lambda: pending_events(history),
            lambda seen: all(seen.get(p) for p in pods),
            timeout=SCHEDULE_S,
            expected=f"a {PENDING_EVENT} event for each of {pods}",
            max_interval=0.5,
        )
    except WaitTimeout:
        return pending_events(history)


def hold(history: History, pod: str | None = None) -> Binding | None:
    """Watch for HOLD_S (two PreBind polls) while the pod must stay unbound; return a binding seen meanwhile."""
    try:
        return history.wait(lambda h: _bound(h, pod), timeout=HOLD_S, expected="no binding (observation window)")
    except WaitTimeout:
        return None


def _bound(history: History, pod: str | None) -> Binding | None:
    return history.bindings().get(pod) if pod else history.binding()


def nominated(history: History, pod: str, before: int | None) -> set[str]:
    """Every nominatedNodeName the pod showed before revision `before` (its binding), or ever."""
    return {
        e.obj["status"]["nominatedNodeName"]
        for e in history.events("pod")
        if e.name == pod
        and (before is None or e.revision < before)
        and (e.obj.get("status") or {}).get("nominatedNodeName")
    }


def start(ctx: ClusterContext, min_nodes: int = 1) -> tuple[OwnedDriver, list[str]]:
    """The usual start of a scheduler scenario: the usable nodes (skip if too few), a namespace, a fresh driver."""
    nodes = usable_nodes(ctx.cluster)
    if len(nodes) < min_nodes:
        pytest.skip(f"needs {min_nodes} schedulable Ready nodes without NoSchedule taints; the cluster has {nodes}")
    return OwnedDriver(ctx, ctx.namespace()), nodes


def start_timed(ctx: ClusterContext) -> tuple[OwnedDriver, list[str], float]:
    """start() for a scenario that waits out the scheduler's binding timeout (skipped where the release fixes it);
    also returns the timeout in seconds."""
    info = ctx.cluster.info
    skip_if_binding_timeout_fixed(info)
    driver, nodes = start(ctx)
    return driver, nodes, float(info.binding_timeout_s)
