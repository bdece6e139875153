"""A guard the suite controls on the Kubernetes API: an admission policy that refuses, in one namespace, every claim
status write that reports a failure (a condition of the allocation's bindingFailureConditions True, but those the
profile declares to mean `reschedule`). IMP-8 holds an implementation between "device out of offer" and "failure
reported" with it, whatever the design: every stack reports a failure by writing the claim's status.devices.

The apiserver loads a policy asynchronously, so the guard is in force only once a dry-run write it also refuses (a
ConfigMap of a marked name in the namespace) is refused; it is lifted once that write is admitted again.
"""

from __future__ import annotations

import time
from types import TracebackType

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for

API = "admissionregistration.k8s.io/v1"
PROBE = "report-guard-probe"
MESSAGE = "held by the conformance suite: a failure report of this claim is refused until the suite lifts its guard"
IN_FORCE_S = 20.0  # the apiserver loads (and drops) a policy within a second or two; a loaded machine takes longer


def _expression(reschedule: tuple[str, ...]) -> str:
    """CEL: admitted unless a device of the allocation shows a failure condition (not a reschedule) True."""
    not_reschedule = "".join(f" && c.type != '{t}'" for t in reschedule)
    reports = (
        "has(object.status) && has(object.status.allocation) && has(object.status.allocation.devices) && "
        "has(object.status.allocation.devices.results) && has(object.status.devices) && "
        "object.status.devices.exists(d, has(d.conditions) && d.conditions.exists(c, c.status == 'True'"
        f"{not_reschedule} && object.status.allocation.devices.results.exists(r, r.driver == d.driver && "
        "r.pool == d.pool && r.device == d.device && has(r.bindingFailureConditions) && "
        "c.type in r.bindingFailureConditions)))"
    )
    return f"request.resource.resource == 'configmaps' ? object.metadata.name != '{PROBE}' : !({reports})"


class ReportGuard:
    """The guard of one namespace's failure reports: `hold()` puts it in force, `lift()` lifts it (both wait until the
    apiserver applies it); the tracker removes what is left at the scenario's end."""

    def __init__(self, cluster: Cluster, objects: ObjectTracker, namespace: str, reschedule: tuple[str, ...]) -> None:
        self.cluster, self.objects, self.namespace = cluster, objects, namespace
        self.name = f"report-guard-{namespace}"[:253]
        self.reschedule = reschedule
        self.held_at: float | None = None  # time.time() once in force
        self.lifted_at: float | None = None  # time.time() once lifted

    def hold(self) -> None:
        rules = [
            {
                "apiGroups": ["resource.k8s.io"],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["resourceclaims/status"],
            },
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]},
        ]
        policy = {
            "apiVersion": API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": self.name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": rules},
                "validations": [{"expression": _expression(self.reschedule), "message": MESSAGE}],
            },
        }
        selector = {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}}
        binding = {
            "apiVersion": API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": self.name},
            "spec": {
                "policyName": self.name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": selector},
            },
        }
        self.objects.create(policy)
        self.objects.create(binding)
        wait_for(self._refused, bool, timeout=IN_FORCE_S, expected=f"the report guard of {self.namespace} in force")
        self.held_at = time.time()

    def lift(self) -> None:
        """Remove the guard (idempotent); returns once a write it refused is admitted again."""
        if self.lifted_at is not None or self.held_at is None:
            return
        for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
            try:
                self.cluster.kind(API, kind).delete(name=self.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        lifted = f"the report guard of {self.namespace} lifted"
        wait_for(self._refused, lambda refused: not refused, timeout=IN_FORCE_S, expected=lifted)
        self.lifted_at = time.time()

    def _refused(self) -> bool:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROBE}}
        try:
            self.cluster.core.create_namespaced_config_map(self.namespace, body, dry_run="All")
        except ApiException as exc:
            if exc.status in (400, 403, 422) and "held by the conformance suite" in str(exc.body):
                return True
            raise
        return False

    def __enter__(self) -> ReportGuard:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.lift()
