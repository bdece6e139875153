"""Credentials of a ServiceAccount: an implementation runs with its own least privilege, not as cluster admin."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

TOKEN_SECONDS = 3600


def service_account_kubeconfig(
    admin_kubeconfig: Path, core: client.CoreV1Api, namespace: str, sa: str, path: Path
) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount with a bound token (TokenRequest API)."""
    token = core.create_namespaced_service_account_token(
        sa,
        namespace,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [], "expirationSeconds": TOKEN_SECONDS},
        },
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
