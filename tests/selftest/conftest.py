"""Selftests run on the release given with --k8s-version (default the suite's default), suites they start too."""

from __future__ import annotations

import pytest

from conformance.cluster.versions import KubeVersion, parse_version
from selftest import suite_runner


@pytest.fixture(scope="session", autouse=True)
def k8s_version(pytestconfig: pytest.Config) -> KubeVersion:
    version = parse_version(pytestconfig.getoption("--k8s-version"))
    suite_runner.VERSION_ARGS[:] = ["--k8s-version", str(version)]
    return version


@pytest.fixture
def gate_can_be_off(k8s_version: KubeVersion) -> None:
    """Skip a "gate off" selftest where the release locks the gate on: such a cluster cannot even start."""
    if reason := k8s_version.release.gate_off_reason("DRADeviceBindingConditions"):
        pytest.skip(f"not applicable: {reason}")
