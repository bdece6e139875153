"""The reference implementation's kind manifests against a real kube-apiserver: server-side dry-run.

`kubectl apply --dry-run=server -k` sends every object through the apiserver's decoding, strict field
validation, defaulting and admission (RBAC rules, Deployments, DaemonSet, Services, ConfigMap) without keeping
anything. What a dry-run cannot show (pods starting on real kubelets, the kubelet plugin's registration) needs
a kind cluster; see README "On kind".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kind_manifests import DEPLOY, KIND_OVERLAY, NAMESPACE, kustomize_files, manifest_objects
from kubernetes.client.exceptions import ApiException

from conformance.cluster import Cluster
from conformance.objects import ObjectTracker


def _kubectl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    assert cluster.info.kubectl is not None
    cmd = [str(cluster.info.kubectl), "--kubeconfig", str(cluster.info.kubeconfig), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _with_namespace(cluster: Cluster, objects: ObjectTracker) -> None:
    """Namespaced objects are dry-run into an existing namespace only; made here (and deleted) if missing."""
    try:
        cluster.core.read_namespace(NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise
        objects.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})


def test_kind_kustomization_passes_a_server_side_dry_run(cluster: Cluster, objects: ObjectTracker) -> None:
    _with_namespace(cluster, objects)
    proc = _kubectl(cluster, "apply", "--dry-run=server", "-k", str(KIND_OVERLAY), "-o", "name")
    assert proc.returncode == 0, proc.stderr
    applied = {line.split(" ")[0] for line in proc.stdout.split("\n") if line}
    expected = {f"{o['kind'].lower()}/{o['metadata']['name']}" for o in manifest_objects(kustomize_files(KIND_OVERLAY))}
    kinds = {name.split("/")[0].split(".")[0] + "/" + name.split("/")[1] for name in applied}
    assert kinds == expected, f"applied {sorted(applied)}"
    assert not _kubectl(cluster, "-n", NAMESPACE, "get", "deployments", "-o", "name").stdout.strip(), "dry-run kept"


def test_the_dry_run_refuses_a_broken_manifest(cluster: Cluster, objects: ObjectTracker, tmp_path: Path) -> None:
    _with_namespace(cluster, objects)
    broken = tmp_path / "broken.yaml"
    fabric = (DEPLOY / "base" / "fabric-manager.yaml").read_text()
    broken.write_text(fabric.replace("replicas: 1", "replicas: 1\n  replicaz: 2", 1))
    proc = _kubectl(cluster, "apply", "--dry-run=server", "-f", str(broken))
    assert proc.returncode != 0 and "replicaz" in proc.stderr, proc.stdout + proc.stderr
