"""The per-release gate list that kind configs use (conformance/versions.py, read from kube_features.go) must be
the non-GA part of what the local provider sets from the real binary's --help (GA gates are on either way), so
kind and local clusters behave alike. Checked for the release whose binaries are built (the default; others when
their binaries are cached)."""

from __future__ import annotations

import pytest

from conformance.cluster.gates import binary_gates, gates_to_enable
from conformance.cluster.providers.base import ClusterSpec, ProviderNotReady
from conformance.cluster.providers.local import LocalProvider
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.toolchain.cache import Cache, default_cache_root
from conformance.cluster.versions import DEFAULT_VERSION, RELEASES, parse_version


def _cached(patch: str) -> bool:
    return Cache(default_cache_root()).component("kubernetes", parse_version(patch).tag).has(["kube-apiserver"])


@pytest.mark.parametrize("patch", [r.latest_patch for r in RELEASES.values()])
def test_release_gates_are_the_settable_non_ga_gates_of_the_binary(patch: str) -> None:
    if patch != DEFAULT_VERSION and not _cached(patch):
        pytest.skip(f"binaries of {patch} not built here (`dra-conformance build --k8s-version {patch}`)")
    version = parse_version(patch)
    binaries = ensure_binaries(version, progress=lambda _m: None)
    known = binary_gates(binaries.kube["kube-apiserver"])
    not_ga = {name: gate for name, gate in known.items() if gate.stage != "GA"}
    assert tuple(gates_to_enable(not_ga)) == version.release.gates


@pytest.mark.parametrize("patch", [r.latest_patch for r in RELEASES.values() if r.locked_gates])
def test_a_locked_gate_turned_off_stops_the_cluster_at_start(patch: str) -> None:
    """Why the "gate off" selftests do not apply where the gate is locked: the real components refuse to start."""
    if not _cached(patch):
        pytest.skip(f"binaries of {patch} not built here (`dra-conformance build --k8s-version {patch}`)")
    version = parse_version(patch)
    locked = version.release.locked_gates
    gate = "DRADeviceBindingConditions" if "DRADeviceBindingConditions" in locked else locked[0]
    local = LocalProvider(progress=lambda _m: None)
    try:
        with pytest.raises(ProviderNotReady, match=gate) as refused:
            local.start(ClusterSpec(version=version, feature_gates={gate: False}))
    finally:
        local.stop()
    assert "exited during start-up" in str(refused.value) and "locked" in str(refused.value), str(refused.value)
