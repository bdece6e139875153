"""The documented CI command returns the suite's verdict as its exit status, on a real local cluster: a success, a
partial and a failing run (README "Verdicts and exit status"). Each run is a small subset of the cluster scenarios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.cli.run import status_line
from selftest.suite_runner import VERSION_ARGS, run_forwarding

SUBSET = ["--", "-k", "test_slice_", "-p", "no:cacheprovider", "-q"]


def _run(tmp_path: Path, *extra: str) -> tuple[int, str]:
    argv = [sys.executable, "-m", "conformance.cli", "run", "--profile", "none", "--reports-dir", str(tmp_path)]
    argv += VERSION_ARGS  # the selftest session's release
    proc = run_forwarding([*argv, *extra])
    return proc.returncode, proc.stdout + proc.stderr


def test_a_subset_is_partial_and_accepted_it_is_success(tmp_path: Path) -> None:
    code, out = _run(tmp_path / "partial", *SUBSET)
    assert code == 6, out[-3000:]
    assert status_line(6) in out.splitlines()[-1], out[-500:]
    code, out = _run(tmp_path / "accepted", "--accept", "partial", *SUBSET)
    assert code == 0, out[-3000:]
    assert status_line(0) in out.splitlines()[-1], out[-500:]


@pytest.mark.usefixtures("gate_can_be_off")
def test_a_broken_cluster_fails_with_1(tmp_path: Path) -> None:
    code, out = _run(
        tmp_path, "--accept", "partial", *SUBSET[:1], "--feature-gates", "DRADeviceBindingConditions=false", *SUBSET[1:]
    )
    assert code == 1, out[-3000:]
    assert status_line(1) in out.splitlines()[-1], out[-500:]
