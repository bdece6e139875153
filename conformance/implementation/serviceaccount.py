"""Credentials of a ServiceAccount: an implementation runs with its own least privilege, not as cluster admin.

A token may be bound to a pod the harness places on a node ({pod_kubeconfig:NAMESPACE/NAME@NODE}): the API server
then puts the pod's node into the token's claims (kubernetes.io.node, ServiceAccountTokenPodNodeInfo) and into the
requester's user info (extra authentication.kubernetes.io/node-name), which is what a per-node daemon's admission
policy checks (e.g. dra-example-driver's: slice writes only from a token bound to a pod on that node). Or to a pod
the scheduler places ({pod_kubeconfig:NAMESPACE/NAME} of a central process: a Deployment's pod, on a node nobody
chose), which carries the node it landed on the same way.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.waits import wait_for

TOKEN_SECONDS = 3600
HOLDER_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled on kwok nodes (kwok plays the kubelet)
MANAGED_BY = {"app.kubernetes.io/managed-by": "dra-conformance"}


def service_account_kubeconfig(
    admin_kubeconfig: Path,
    core: client.CoreV1Api,
    namespace: str,
    sa: str,
    path: Path,
    bound_to: dict[str, str] | None = None,
) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount with a bound token (TokenRequest API); `bound_to`: the
    object the token is bound to (boundObjectRef: kind, apiVersion, name, uid), valid only while it exists."""
    spec: dict[str, Any] = {"audiences": [], "expirationSeconds": TOKEN_SECONDS}
    if bound_to is not None:
        spec["boundObjectRef"] = bound_to
    token = core.create_namespaced_service_account_token(
        sa, namespace, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    ).status.token
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster_entry = admin["clusters"][0]
    user = f"system:serviceaccount:{namespace}:{sa}"
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster_entry],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": sa, "context": {"cluster": cluster_entry["name"], "user": user}}],
        "current-context": sa,
    }
    path.write_text(yaml.safe_dump(kubeconfig))
    path.chmod(0o600)
    return path


SCHEDULED = "scheduled"  # holder_pod_name's node part of a pod the scheduler places
SCHEDULE_TIMEOUT_S = 60.0


def holder_pod_name(sa: str, node: str | None) -> str:
    """A pod name per (ServiceAccount, node or None: placed by the scheduler): readable, and unique even where a long
    node name is cut."""
    where = node or SCHEDULED
    digest = hashlib.sha256(f"{sa}@{where}".encode()).hexdigest()[:8]
    return f"credential-{sa}-{where}"[:53].rstrip("-.") + f"-{digest}"


def place_holder_pod(core: client.CoreV1Api, namespace: str, sa: str, node: str | None) -> dict[str, str]:
    """The pod a node-bound token is bound to: running as `sa` on `node` (nodeName: no scheduler) or, with node None,
    where the scheduler places it (scheduled_node says where), tolerating every taint; returns its reference
    (boundObjectRef). One that an earlier run left while it is being deleted is waited out; one that exists is
    reused."""
    name = holder_pod_name(sa, node)
    placed = {"nodeName": node} if node is not None else {}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            **placed,
            "serviceAccountName": sa,
            "automountServiceAccountToken": False,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "credential-holder", "image": HOLDER_IMAGE}],
        },
    }

    def attempt() -> client.V1Pod | None:
        try:
            return core.create_namespaced_pod(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        pod = core.read_namespaced_pod(name, namespace)
        return None if pod.metadata.deletion_timestamp else pod

    pod = wait_for(attempt, lambda p: p is not None, timeout=60.0, expected=f"pod {namespace}/{name} to be created")
    assert pod is not None
    if node is not None and pod.spec.node_name != node:
        raise RuntimeError(f"pod {namespace}/{name} exists on node {pod.spec.node_name}, not {node}")
    return {"kind": "Pod", "apiVersion": "v1", "name": name, "uid": pod.metadata.uid}


def scheduled_node(core: client.CoreV1Api, namespace: str, name: str, timeout: float = SCHEDULE_TIMEOUT_S) -> str:
    """The node the scheduler placed holder pod `name` on, once it has (a token bound to it carries that node only
    from then on)."""

    def node() -> str | None:
        return core.read_namespaced_pod(name, namespace).spec.node_name

    found = wait_for(node, bool, timeout=timeout, expected=f"the scheduler to place pod {namespace}/{name}")
    assert found is not None
    return found


def remove_holder_pod(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    """Delete a holder pod at once (grace 0: kwok or a gone node would never confirm it); a problem, or None."""
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            return f"cannot delete pod {namespace}/{name}: {exc.status} {exc.reason}"
    return None
