"""The kind provider for real: the built kind, the node image of the release, a Docker engine (the running one, or a
dockerd the provider starts, stopped by its last user). The cluster comes up with every worker Ready and labelled, a
pod runs on a worker's containerd, and stop() leaves nothing: no cluster, no node container, no work folder, no
dockerd it started (unless another run still shares it).

Needs the node image (`make kind-image`, or kind's own image where a registry serves it) and the reference image
the provider loads; without them the test is skipped with the command that builds them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.kind.config import CLUSTER_NAME, NODE_IMAGES
from conformance.cluster.kind.engine import ensure_engine
from conformance.cluster.kind.images import REFERENCE_IMAGE, local_node_image
from conformance.cluster.kind.tools import missing_images
from conformance.cluster.providers import ClusterSpec
from conformance.cluster.providers.base import FABRIC_LABEL, KIND_NODES, default_nodes
from conformance.cluster.providers.kind import KindProvider, kind_workdir
from conformance.cluster.versions import KubeVersion
from conformance.cluster.waits import wait_for

POD_TIMEOUT_S = 120.0


def _images_or_skip(version: KubeVersion) -> None:
    engine = ensure_engine()
    try:
        pinned = NODE_IMAGES.get((version.major, version.minor))
        have_node = local_node_image(version) or (pinned and not missing_images([pinned]))
        missing = missing_images([REFERENCE_IMAGE])
    finally:
        engine.stop()
    if not have_node or missing:
        pytest.skip(f"no kind node image for {version} or no {REFERENCE_IMAGE}: run `make kind-image`")


def _node_containers() -> list[str]:
    proc = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={CLUSTER_NAME}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.stdout.split()


def test_kind_cluster_comes_up_runs_a_pod_and_leaves_nothing(
    k8s_version: KubeVersion, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _images_or_skip(k8s_version)
    monkeypatch.chdir(tmp_path)  # pytest-kind keeps .pytest-kind/<name> in the working directory
    said: list[str] = []
    provider = KindProvider(progress=lambda m: (said.append(m), print(m)))
    try:
        info = provider.start(ClusterSpec(version=k8s_version, nodes=default_nodes(KIND_NODES)))
        started_dockerd = provider.engine is not None and provider.engine.started_here
        cluster = Cluster(info)
        workers = [n for n in cluster.core.list_node().items if FABRIC_LABEL in (n.metadata.labels or {})]
        assert len(workers) == KIND_NODES, [n.metadata.name for n in workers]
        node = workers[0].metadata.name
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kind-selftest"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
                "terminationGracePeriodSeconds": 0,
            },
        }
        cluster.core.create_namespaced_pod("default", pod)
        wait_for(
            lambda: cluster.core.read_namespaced_pod("kind-selftest", "default"),
            lambda p: p.status.phase == "Running",
            timeout=POD_TIMEOUT_S,
            expected=f"the pause pod to run on {node}'s containerd",
            describe=lambda p: f"phase={p.status.phase} statuses={p.status.container_statuses}",
        )
        cluster.close()
    finally:
        provider.stop()
    assert f"kind cluster {CLUSTER_NAME} deleted" in said
    assert not kind_workdir(CLUSTER_NAME).exists() and not (tmp_path / ".pytest-kind" / CLUSTER_NAME).exists()
    if started_dockerd and any("other user(s) hold a lease" in m for m in said):
        pass  # another run shares the suite-started dockerd: its last user stops it (tests/test_engine_users.py)
    elif started_dockerd:
        assert any(m.startswith("stopping the dockerd") for m in said), said
        assert subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0
    else:
        assert not _node_containers(), "node containers left behind"
