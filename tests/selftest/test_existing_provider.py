"""The existing-cluster provider: same outcomes as the local provider on the same kind of cluster, refuses an
unmarked cluster, and names what a cluster lacks before any test runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.providers.base import ClusterSpec, ProviderNotReady
from conformance.cluster.providers.existing import MARKER_NAME, MARKER_NAMESPACE, ExistingProvider, mark_test_cluster
from conformance.cluster.providers.local import LocalProvider
from conformance.cluster.versions import KubeVersion
from selftest.suite_runner import profile_variant, run_suite


def test_suite_outcomes_match_the_local_provider(cluster: Cluster, tmp_path: Path) -> None:
    local_code, local_out, local_outcomes = run_suite(tmp_path / "local.xml")
    # The existing cluster is a local one (kwok): the profile says the suite may add and delete a node there (IMP-16
    # runs on the local provider without it).
    kwok = profile_variant(tmp_path, "  multiDeviceClaims: true", "  multiDeviceClaims: true\n  nodeLifecycle: true")
    code, out, outcomes = run_suite(
        tmp_path / "existing.xml",
        "--provider",
        "existing",
        "--kubeconfig",
        str(cluster.info.kubeconfig),
        "--profile",
        str(kwok),
        # The suite reaches the kept cluster's scheduler as it would a vendor's: BASE-2 reads its gates there too.
        f"--scheduler-url={cluster.info.scheduler_endpoint}",
    )
    assert code == local_code == 0, out[-3000:] + local_out[-3000:]
    assert local_outcomes and outcomes == local_outcomes


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


@pytest.mark.usefixtures("gate_can_be_off")
def test_cluster_without_the_gate_is_refused_with_the_reason(k8s_version: KubeVersion) -> None:
    local = LocalProvider(progress=lambda _m: None)
    info = local.start(ClusterSpec(version=k8s_version, feature_gates={"DRADeviceBindingConditions": False}))
    try:
        with pytest.raises(ProviderNotReady, match="DRADeviceBindingConditions"):
            ExistingProvider(str(info.kubeconfig), progress=lambda _m: None).start(ClusterSpec())
    finally:
        local.stop()
