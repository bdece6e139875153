"""The existing-cluster provider: same outcomes as the local provider on the same kind of cluster, refuses an
unmarked cluster, and names what a cluster lacks before any test runs."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster import Cluster
from conformance.providers.base import ClusterSpec, ProviderNotReady
from conformance.providers.existing import MARKER_NAME, MARKER_NAMESPACE, ExistingProvider, mark_test_cluster
from conformance.providers.local import LocalProvider

ROOT = Path(__file__).resolve().parents[2]


def run_suite(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    junit = tmp_path / f"{name}.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/suite", "-p", "no:cacheprovider", f"--junitxml={junit}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    outcomes = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            outcomes[case.get("name")] = kinds[0] if kinds else "passed"
    return proc, outcomes


def test_suite_outcomes_match_the_local_provider(cluster: Cluster, tmp_path: Path) -> None:
    local, local_outcomes = run_suite(tmp_path, "local")
    existing, existing_outcomes = run_suite(
        tmp_path, "existing", "--provider", "existing", "--kubeconfig", str(cluster.info.kubeconfig)
    )
    assert existing.returncode == local.returncode == 0, existing.stdout[-3000:] + local.stdout[-3000:]
    assert local_outcomes and existing_outcomes == local_outcomes


@pytest.fixture
def unmarked(cluster: Cluster) -> Iterator[Cluster]:
    cluster.core.delete_namespaced_config_map(MARKER_NAME, MARKER_NAMESPACE)
    yield cluster
    mark_test_cluster(cluster.core, "local")


def test_unmarked_cluster_is_refused_unless_allowed(unmarked: Cluster) -> None:
    kubeconfig = str(unmarked.info.kubeconfig)
    with pytest.raises(ProviderNotReady, match=f"{MARKER_NAMESPACE}/{MARKER_NAME}"):
        ExistingProvider(kubeconfig).start(ClusterSpec())
    info = ExistingProvider(kubeconfig, allow_unmarked=True, progress=lambda _m: None).start(ClusterSpec())
    assert info.version == unmarked.info.version and len(info.nodes) == len(unmarked.info.nodes)


def test_cluster_without_the_gate_is_refused_with_the_reason() -> None:
    local = LocalProvider(progress=lambda _m: None)
    info = local.start(ClusterSpec(feature_gates={"DRADeviceBindingConditions": False}))
    try:
        with pytest.raises(ProviderNotReady, match="DRADeviceBindingConditions"):
            ExistingProvider(str(info.kubeconfig), progress=lambda _m: None).start(ClusterSpec())
    finally:
        local.stop()
