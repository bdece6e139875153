"""The kind provider with the real kind binary (built into the cache) and pytest-kind, as far as a machine without
a Docker engine lets it go: the stand-in docker of conformance.cluster.kind.validate plays an empty engine and
stops kind when it would pull the node image, the first step after kind loaded and validated the generated config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.cluster.kind.config import CLUSTER_NAME, NODE_IMAGES
from conformance.cluster.kind.validate import stand_in_docker
from conformance.cluster.providers import ClusterSpec, ProviderNotReady
from conformance.cluster.providers.base import KIND_NODES, default_nodes
from conformance.cluster.providers.kind import KindProvider, kind_workdir


def test_provider_writes_a_config_kind_accepts_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = stand_in_docker(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_STAND_IN_LOG", str(log))
    monkeypatch.setenv("KIND_EXPERIMENTAL_PROVIDER", "docker")
    monkeypatch.chdir(tmp_path)  # pytest-kind keeps .pytest-kind/<name> in the working directory
    said: list[str] = []
    provider = KindProvider(load_images=(), kubectl_bin="/nonexistent/kubectl", progress=said.append)
    with pytest.raises(ProviderNotReady, match="create cluster"):
        provider.start(ClusterSpec(nodes=default_nodes(KIND_NODES)))  # as the plugin's default on kind
    calls = log.read_text().splitlines()
    assert f"inspect --type=image {NODE_IMAGES[(1, 37)]}" in calls, calls
    assert not (tmp_path / ".pytest-kind" / CLUSTER_NAME).exists() and not kind_workdir(CLUSTER_NAME).exists()
    assert f"kind cluster {CLUSTER_NAME} deleted" in said
