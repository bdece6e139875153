"""The reference implementation's kind manifests against a real kube-apiserver: server-side dry-run.

`kubectl apply --dry-run=server -k` sends every object through the apiserver's decoding, strict field
validation, defaulting and admission (RBAC rules, Deployments, DaemonSet, Services, ConfigMap) without keeping
anything. What a dry-run cannot show (pods starting on real kubelets, the kubelet plugin's registration) needs
a kind cluster; see docs/clusters.md "On kind".
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kind_manifests import DEPLOY, KIND_OVERLAY, NAMESPACE, kustomize_files, manifest_objects
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for


def _kubectl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    assert cluster.info.kubectl is not None
    cmd = [str(cluster.info.kubectl), "--kubeconfig", str(cluster.info.kubeconfig), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def fabric_namespace(cluster: Cluster, run_id: str) -> Iterator[str]:
    """Namespaced objects are dry-run into an existing namespace only: made once here if missing, deleted after.

    One for the module: a namespace deleted by one test is still terminating in the next, and refuses content.
    """
    tracker = ObjectTracker(cluster, run_id)
    try:
        cluster.core.read_namespace(NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise
        tracker.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    yield NAMESPACE
    failures = tracker.cleanup()
    assert not failures, failures


def test_kind_kustomization_passes_a_server_side_dry_run(cluster: Cluster, fabric_namespace: str) -> None:
    proc = _kubectl(cluster, "apply", "--dry-run=server", "-k", str(KIND_OVERLAY), "-o", "name")
    assert proc.returncode == 0, proc.stderr
    applied = {line.split(" ")[0] for line in proc.stdout.split("\n") if line}
    expected = {f"{o['kind'].lower()}/{o['metadata']['name']}" for o in manifest_objects(kustomize_files(KIND_OVERLAY))}
    kinds = {name.split("/")[0].split(".")[0] + "/" + name.split("/")[1] for name in applied}
    assert kinds == expected, f"applied {sorted(applied)}"
    assert not _kubectl(cluster, "-n", NAMESPACE, "get", "deployments", "-o", "name").stdout.strip(), "dry-run kept"


def test_the_dry_run_refuses_a_broken_manifest(cluster: Cluster, fabric_namespace: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    fabric = (DEPLOY / "base" / "fabric-manager.yaml").read_text()
    broken.write_text(fabric.replace("replicas: 1", "replicas: 1\n  replicaz: 2", 1))
    proc = _kubectl(cluster, "apply", "--dry-run=server", "-f", str(broken))
    assert proc.returncode != 0 and "replicaz" in proc.stderr, proc.stdout + proc.stderr


def _can(cluster: Cluster, service_account: str, verb: str, resource: str) -> bool:
    user = f"system:serviceaccount:{NAMESPACE}:{service_account}"
    return _kubectl(cluster, "auth", "can-i", verb, resource, "--as", user, "-n", "default").returncode == 0


def test_new_service_accounts_get_exactly_their_rules(
    cluster: Cluster, fabric_namespace: str, objects: ObjectTracker
) -> None:
    """The kubelet plugin's RBAC (new here; the controller's is fake-drivers' test_rbac.py)."""
    rbac = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    for doc in manifest_objects([DEPLOY / "base" / "kubelet-plugin.yaml"]):
        if doc["kind"] in rbac:
            objects.create(doc)
    expected = {
        ("fake-kubelet-plugin", "get", "resourceclaims.resource.k8s.io"): True,
        ("fake-kubelet-plugin", "list", "resourceclaims.resource.k8s.io"): False,
        ("fake-kubelet-plugin", "update", "resourceclaims.resource.k8s.io/status"): False,
        ("fake-kubelet-plugin", "create", "resourceslices.resource.k8s.io"): True,
        ("fake-kubelet-plugin", "list", "resourceslices.resource.k8s.io"): True,
        ("fake-kubelet-plugin", "get", "nodes"): True,
        ("fake-kubelet-plugin", "create", "pods"): False,
    }
    wait_for(
        lambda: {key: _can(cluster, *key) for key in expected},
        lambda seen: seen == expected,
        timeout=30.0,
        expected=f"the authorizer to answer {expected}",
    )
