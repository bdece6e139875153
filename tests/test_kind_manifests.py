"""The reference implementation's image and manifests for real clusters, checked without a cluster or Docker.

The same objects reach a cluster two ways: `kubectl apply -k fake-drivers/kind` and the
harness applying fixtures/profiles/reference-kind.yaml's files one by one; these tests keep the two equal and the
content consistent with the kind cluster (node names, labels, ports) and with the components' own config
loaders. The server-side dry-run is in tests/selftest/test_kind_manifests.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from fake_drivers.fabric.config import build_config as fabric_config
from fake_drivers.nodedriver.config import build_config as nodes_config
from kind_manifests import DEPLOY, KIND_OVERLAY, NAMESPACE, PROFILE, ROOT, kustomize_files, manifest_objects

from conformance.cluster.kind.config import DEFAULT_WORKERS, FABRIC_NODE_PORT, kind_config, worker_name
from conformance.cluster.providers.base import FABRIC_LABEL
from conformance.cluster.providers.kind import REFERENCE_IMAGE
from conformance.cluster.versions import DEFAULT_VERSION, parse_version
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import load_profile


def _containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pods = [o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("Deployment", "DaemonSet")]
    return [c for pod in pods for c in pod["containers"]]


def test_profile_applies_exactly_the_kind_kustomization() -> None:
    loaded = load_profile(PROFILE)
    impl = Implementation(loaded, Path("/unused"), Path("/unused"))
    assert [Path(impl.resolve(m)).resolve() for m in loaded.profile.manifests] == kustomize_files(KIND_OVERLAY)
    assert DEPLOY / "rbac.yaml" in kustomize_files(KIND_OVERLAY), "the least-privilege RBAC is reused, not copied"


def test_every_object_names_its_namespace_and_every_container_the_reference_image() -> None:
    objects = manifest_objects(kustomize_files(KIND_OVERLAY))
    cluster_scoped = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    assert all(o["metadata"].get("namespace") == NAMESPACE for o in objects if o["kind"] not in cluster_scoped)
    assert {c["image"] for c in _containers(objects)} == {REFERENCE_IMAGE}
    commands = {c["command"][0] for c in _containers(objects)}
    # The node half is the Go kubelet plugin (a DaemonSet publishing each node's slice), not the Python node driver.
    assert commands == {"fake-fabric-manager", "reference-controller", "fake-kubelet-plugin"}


def test_config_map_fits_the_kind_cluster_and_the_components_accept_it() -> None:
    (config_map,) = [o for o in manifest_objects(kustomize_files(KIND_OVERLAY)) if o["kind"] == "ConfigMap"]
    data = config_map["data"]
    fabric = fabric_config(yaml.safe_load(data["fabric.yaml"]))
    nodes = nodes_config(yaml.safe_load(data["nodes.yaml"]))
    workers = kind_config(parse_version(DEFAULT_VERSION), scheduler_config_path="/s")["nodes"][1:]
    labelled = {worker_name(i): w["labels"][FABRIC_LABEL] for i, w in enumerate(workers)}
    assert len(labelled) == DEFAULT_WORKERS
    assert {node: fab for fab, members in fabric.fabrics.items() for node in members} == labelled
    assert set(nodes.nodes) == set(labelled)
    kubeconfig = yaml.safe_load(data["kubeconfig"])
    assert kubeconfig["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}


def test_fabric_probe_goes_through_the_node_port_that_kind_publishes() -> None:
    objects = manifest_objects(kustomize_files(KIND_OVERLAY))
    ports = [port for o in objects if o["kind"] == "Service" for port in o["spec"]["ports"]]
    node_ports = [port["nodePort"] for port in ports if "nodePort" in port]
    assert node_ports == [FABRIC_NODE_PORT]
    profile = load_profile(PROFILE).profile
    assert profile.fabric_probe and profile.fabric_probe.url.startswith(f"http://127.0.0.1:{FABRIC_NODE_PORT}/")


def test_dockerfile_passes_hadolint_and_a_bad_one_does_not(tmp_path: Path) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    good = subprocess.run([hadolint, ROOT / "fake-drivers" / "Dockerfile"], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install fastapi\n")
    refused = subprocess.run([hadolint, bad], capture_output=True, text=True)
    assert refused.returncode != 0 and "DL3007" in refused.stdout


def test_dockerfile_pins_the_toolchains_the_sources_need() -> None:
    dockerfile = (ROOT / "fake-drivers" / "Dockerfile").read_text()
    go = re.search(r"^FROM golang:(\d+)\.(\d+)\.(\d+)-", dockerfile, re.M)
    python = re.search(r"^FROM python:3\.(\d+)\.\d+-slim", dockerfile, re.M)
    assert go and python, "base images must be pinned to a full version"
    gomod = (ROOT / "fake-drivers" / "kubelet-plugin" / "go.mod").read_text()
    need = tuple(int(x) for x in re.search(r"^go (\d+)\.(\d+)", gomod, re.M).groups())  # type: ignore[union-attr]
    assert (int(go[1]), int(go[2])) >= need
    assert int(python[1]) >= 11, "fake-drivers needs Python 3.11+"
