"""kind cluster configurations, generated per Kubernetes release from one source (conformance.cluster.versions).

`kind-config.yaml` at the top of the repository is this module's output for the default release
(`dra-conformance kind-config`); the kind provider writes the one for the release it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from conformance.cluster.audit import POLICY as AUDIT_POLICY
from conformance.cluster.providers.base import FABRIC_LABEL, NODE_ROLE_LABEL
from conformance.cluster.providers.local import CLIENT_RATE, scheduler_config
from conformance.cluster.versions import KIND_VERSION, KubeVersion

# kind names its node containers (and so the Kubernetes nodes) <cluster>-control-plane, <cluster>-worker,
# <cluster>-worker2, ...: the reference manifests name these nodes, so the cluster name is fixed.
CLUSTER_NAME = "dra-conformance"
DEFAULT_WORKERS = 4
# NodePort of the fabric manager's Service, published on the host's loopback through the control-plane node.
FABRIC_NODE_PORT = 30790
SCHEDULER_CONFIG_IN_NODE = "/etc/kubernetes/dra-conformance/scheduler-config.yaml"
# kube-apiserver's audit policy and log (cluster/audit.py), in a folder of the host mounted into the control-plane node
# and from there into the apiserver's static pod, so the suite reads the log on the host.
AUDIT_DIR_IN_NODE = "/var/log/dra-conformance-audit"
AUDIT_POLICY_FILE = "audit-policy.yaml"
AUDIT_LOG_FILE = "audit.log"
# The kubeconfig kubeadm writes for kube-scheduler (and passes as --kubeconfig, which a config file overrides).
SCHEDULER_KUBECONFIG_IN_NODE = "/etc/kubernetes/scheduler.conf"
# containerd 2 (kind's node images for 1.34+) reads the v2 path too; CDI is how the kubelet plugin's devices
# reach the container.
CDI_PATCH = '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
# Node images kind KIND_VERSION was released with (its pkg/apis/config/defaults/image.go), pinned by digest.
NODE_IMAGES: dict[tuple[int, int], str] = {
    (1, 37): "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5",
}


class KindConfigError(ValueError):
    """The kind configuration cannot be made as asked (no node image known, bad worker count)."""


def node_image(version: KubeVersion, override: str | None = None) -> str:
    if override:
        return override
    image = NODE_IMAGES.get((version.major, version.minor))
    if image is None:
        raise KindConfigError(
            f"kind {KIND_VERSION} ships no node image for Kubernetes {version.major}.{version.minor}; build one "
            f"(`kind build node-image v{version}`) and pass it with --kind-image"
        )
    return image


def worker_name(index: int, cluster: str = CLUSTER_NAME) -> str:
    """The node name kind gives the index-th worker (0-based)."""
    return f"{cluster}-worker{index + 1 if index else ''}"


def kind_config(
    version: KubeVersion,
    *,
    scheduler_config_path: str,
    workers: int = DEFAULT_WORKERS,
    gate_overrides: dict[str, bool] | None = None,
    image: str | None = None,
    fabrics: int = 2,
    audit_dir: str | None = None,
) -> dict[str, Any]:
    """The kind Cluster for `version`: gates, runtime-config, scheduler bindingTimeout, CDI, labelled workers.

    scheduler_config_path is where the caller puts scheduler_file()'s content on the host (kind resolves a
    relative path against its working directory). audit_dir: a host folder holding AUDIT_POLICY_FILE, where
    kube-apiserver writes its audit log (the kind provider's; the committed kind-config.yaml has none).
    """
    if workers < 2:
        raise KindConfigError(f"need at least 2 workers (two fabrics), got {workers}")
    release = version.release
    for name, value in (gate_overrides or {}).items():
        if not value and (reason := release.gate_off_reason(name)):
            raise KindConfigError(reason)  # kubeadm would bring up a control plane that never starts
    gates = {name: True for name in release.gates} | (gate_overrides or {})
    image = node_image(version, image)
    control_plane: dict[str, Any] = {
        "role": "control-plane",
        "image": image,
        # The fabric probe and fault injector, for the test process on the host (loopback only: no auth).
        "extraPortMappings": [
            {"containerPort": FABRIC_NODE_PORT, "hostPort": FABRIC_NODE_PORT, "listenAddress": "127.0.0.1"}
        ],
    }
    # Mounted on every release: besides bindingTimeout (1.35+) it raises the client rate, which kube-scheduler
    # reads only from a config file.
    control_plane["extraMounts"] = [
        {"hostPath": scheduler_config_path, "containerPath": SCHEDULER_CONFIG_IN_NODE, "readOnly": True}
    ]
    if audit_dir:
        control_plane["extraMounts"].append({"hostPath": audit_dir, "containerPath": AUDIT_DIR_IN_NODE})
    control_plane["kubeadmConfigPatches"] = [yaml.safe_dump(_control_plane_patch(bool(audit_dir)), sort_keys=False)]
    config: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": CLUSTER_NAME,
        "featureGates": gates,
    }
    if release.runtime_config:
        config["runtimeConfig"] = dict(item.split("=", 1) for item in release.runtime_config.split(","))
    config["containerdConfigPatches"] = [CDI_PATCH]
    config["nodes"] = [control_plane] + [
        {"role": "worker", "image": image, "labels": {FABRIC_LABEL: f"fabric-{i % fabrics}", NODE_ROLE_LABEL: "worker"}}
        for i in range(workers)
    ]
    return config


def scheduler_file(version: KubeVersion, binding_timeout_s: int, gates: dict[str, bool] | None = None) -> str:
    """The KubeSchedulerConfiguration the kind control plane mounts (the local provider's, same timeout rule and
    client rate), with the kubeconfig kubeadm wrote for the scheduler."""
    gates = {name: True for name in version.release.gates} | (gates or {})
    timeout = binding_timeout_s if _timeout_configurable(version, gates) else None
    return yaml.safe_dump(scheduler_config(timeout, kubeconfig=SCHEDULER_KUBECONFIG_IN_NODE), sort_keys=False)


def _timeout_configurable(version: KubeVersion, gates: dict[str, bool]) -> bool:
    # bindingTimeout exists from 1.35 on, and is a config error while the binding-conditions gate is off.
    return version.release.binding_timeout_configurable and gates.get("DRADeviceBindingConditions", True)


def _control_plane_patch(audit: bool = False) -> dict[str, Any]:
    # No apiVersion: kind then merges map-style extraArgs into kubeadm v1beta3 (<1.36) and v1beta4 (list) alike.
    # kube-controller-manager's client rate by flag (kubeadm's default 20/s held SCALE-1 near 12.7 pods/s).
    patch: dict[str, Any] = {
        "kind": "ClusterConfiguration",
        "controllerManager": {
            "extraArgs": {"kube-api-qps": str(CLIENT_RATE["qps"]), "kube-api-burst": str(CLIENT_RATE["burst"])}
        },
        "scheduler": {
            "extraArgs": {"config": SCHEDULER_CONFIG_IN_NODE},
            "extraVolumes": [
                {
                    "name": "dra-conformance-scheduler-config",
                    "hostPath": SCHEDULER_CONFIG_IN_NODE,
                    "mountPath": SCHEDULER_CONFIG_IN_NODE,
                    "readOnly": True,
                    "pathType": "File",
                }
            ],
        },
    }
    if audit:
        patch["apiServer"] = {
            "extraArgs": {
                "audit-policy-file": f"{AUDIT_DIR_IN_NODE}/{AUDIT_POLICY_FILE}",
                "audit-log-path": f"{AUDIT_DIR_IN_NODE}/{AUDIT_LOG_FILE}",
            },
            "extraVolumes": [
                {
                    "name": "dra-conformance-audit",
                    "hostPath": AUDIT_DIR_IN_NODE,
                    "mountPath": AUDIT_DIR_IN_NODE,
                    "readOnly": False,
                    "pathType": "DirectoryOrCreate",
                }
            ],
        }
    return patch


HEADER = (
    "# Generated by `dra-conformance kind-config` (conformance/kind/config.py) from conformance/versions.py;\n"
    "# do not edit. kind resolves a relative extraMounts hostPath against its working directory.\n"
)


def dump(config: dict[str, Any]) -> str:
    """YAML with multi-line strings (the TOML and kubeadm patches) as literal blocks, readable in review."""

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return HEADER + yaml.dump(config, Dumper=_Dumper, sort_keys=False)


def write_kind_files(
    config_path: Path, scheduler_path: Path, version: KubeVersion, binding_timeout_s: int, **options: Any
) -> Path:
    """Write the kind config and the scheduler config it mounts (referenced as scheduler_path is given), and with
    `audit_dir` the audit policy there."""
    for path in (config_path, scheduler_path):
        path.parent.mkdir(parents=True, exist_ok=True)
    if audit_dir := options.get("audit_dir"):
        Path(audit_dir).mkdir(parents=True, exist_ok=True)
        (Path(audit_dir) / AUDIT_POLICY_FILE).write_text(yaml.safe_dump(AUDIT_POLICY))
    scheduler_path.write_text(scheduler_file(version, binding_timeout_s, options.get("gate_overrides")))
    config_path.write_text(dump(kind_config(version, scheduler_config_path=str(scheduler_path), **options)))
    return config_path
