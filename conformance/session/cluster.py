"""The session's cluster fixture: brought up from the options (or checked, if it exists), checked for leftover
namespaces at the end, its logs gathered and torn down."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.gates import parse_gate_overrides
from conformance.cluster.objects import RUN_LABEL
from conformance.cluster.providers import ClusterSpec, ProviderNotReady, make_provider
from conformance.cluster.providers.base import KIND_NODES, LOCAL_NODES, Crash, default_nodes
from conformance.cluster.staticpods import StaticPodWatch
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import parse_version
from conformance.cluster.waits import CANCELLED, Cancelled, wait_for
from conformance.implementation.profile import DEFAULT_BINDING_TIMEOUT_S
from conformance.session.shared import CLUSTER_KEY, CRASHES_KEY, EVIDENCE_KEY, PROFILE_KEY, mark, progress

NAMESPACE_GONE_S = 60.0


def _binding_timeout(config: pytest.Config) -> int:
    """--binding-timeout, or what the profile's promises need (Profile.binding_timeout_s) on a cluster the suite
    starts; an existing cluster's cannot be set, so there it is what the user declares (SCH-6 and BASE-2 measure it)."""
    given = config.getoption("--binding-timeout")
    if given is not None:
        return int(given)
    loaded = config.stash.get(PROFILE_KEY, None)
    if loaded is None or config.getoption("--provider") == "existing":
        return DEFAULT_BINDING_TIMEOUT_S
    return loaded.profile.binding_timeout_s()


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config, run_id: str) -> Iterator[Cluster]:
    """A running cluster for the whole session; torn down at the end unless --keep-cluster."""
    opt = pytestconfig.getoption
    spec = ClusterSpec(
        version=parse_version(opt("--k8s-version")),
        nodes=default_nodes(opt("--nodes") or (KIND_NODES if opt("--provider") == "kind" else LOCAL_NODES)),
        binding_timeout_s=_binding_timeout(pytestconfig),
        keep=opt("--keep-cluster"),
        feature_gates=parse_gate_overrides(opt("--feature-gates")),
        scheduler_verbosity=opt("--scheduler-verbosity"),
    )
    provider = make_provider(
        opt("--provider"),
        download=opt("--download-binaries"),
        kubeconfig=opt("--kubeconfig"),
        allow_unmarked=opt("--allow-unmarked-cluster"),
        progress=progress(pytestconfig),
        option=opt,  # the kind provider reads pytest-kind's options (--cluster-name, --kind-image, ...)
    )
    try:
        info = provider.start(spec)
    except (ProviderNotReady, BuildError) as exc:
        pytest.exit(f"cannot start the {provider.name} cluster: {exc}", returncode=3)
    pytestconfig.stash[CLUSTER_KEY] = (info, getattr(provider, "timings", {}))
    handle = Cluster(info)
    try:
        # local: the provider's watchdog; kind and existing: the kubelet restarts static pods, counted from here
        pytestconfig.stash[CRASHES_KEY] = getattr(provider, "crashes", None) or StaticPodWatch.begin(handle.core)
        mark(pytestconfig, "clusterReady")
        yield handle
        if not CANCELLED.is_set():  # an interrupted run deletes its objects but does not wait to check
            leaks = _leftover_namespaces(handle, run_id)
            assert not leaks, f"namespaces of this run still present after the tests: {leaks}"
    finally:
        handle.close()
        workdir = getattr(provider, "workdir", None)  # the local provider's components log there
        if isinstance(workdir, Path):
            pytestconfig.stash[EVIDENCE_KEY].gather_logs(workdir, "control-plane", "control-plane component logs")
        provider.stop()


@pytest.fixture(scope="session")
def control_plane_crashes(pytestconfig: pytest.Config, cluster: Cluster) -> Callable[[], list[Crash] | None]:
    """The control-plane components that exited on their own so far, asked when called (SCH-11); None where the
    provider does not watch them."""
    return pytestconfig.stash[CRASHES_KEY]


def _leftover_namespaces(cluster: Cluster, run_id: str) -> list[str]:
    def names() -> list[str]:
        items = cluster.core.list_namespace(label_selector=f"{RUN_LABEL}={run_id}").items
        return [ns.metadata.name for ns in items]

    try:
        wait_for(
            names,
            lambda left: not left,
            timeout=NAMESPACE_GONE_S,
            expected="test namespaces to be deleted",
            max_interval=0.5,  # the run's tail waits on this
        )
    except AssertionError:
        return names()
    except Cancelled:  # interrupted meanwhile: not checked
        return []
    return []
