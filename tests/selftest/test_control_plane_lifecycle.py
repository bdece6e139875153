"""`dra-conformance lifecycle` (GATE-*, UPG-*, SKEW-1) fails on a wrong procedure, each the kind of mistake its
requirement is about: kube-scheduler left with the gate off after a re-enable (GATE-3), the fabric slice and a bound
pod restored through the server while its gate is off (GATE-1, GATE-2), the older kube-scheduler started with the gate
off (SKEW-1, UPG-2), a downgrade whose kube-apiserver runs with the gate off while the driver republishes (UPG-1).

Each runs the real command against its own local cluster (the cached binaries; the upgrade ones need the release one
minor older too), and reads the requirement outcomes from its conformance report. About 5 (gates) or 8 (upgrade)
minutes each on a loaded 2-core machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.cluster.toolchain.build import is_cached
from conformance.cluster.versions import KubeVersion, parse_version
from conformance.lifecycle.run import run_gates, run_upgrade


def _older(version: KubeVersion) -> KubeVersion:
    older = parse_version(f"{version.major}.{version.minor - 1}")
    if not is_cached(older):
        pytest.skip(f"needs the cached binaries of {older} (`dra-conformance build --k8s-version {older}`)")
    return older


def _outcomes(out: Path) -> dict[str, dict]:
    return yaml.safe_load((out / "conformance-report.yaml").read_text())["requirements"]


@pytest.mark.usefixtures("gate_can_be_off")
def test_scheduler_left_with_the_gate_off_fails_gate_3(tmp_path: Path, k8s_version: KubeVersion) -> None:
    outcome = run_gates(k8s_version, tmp_path / "r", variant="scheduler-stays-off")
    req = _outcomes(outcome.out)
    assert req["GATE-3"]["outcome"] == "failed", req["GATE-3"]
    assert "new pod" in req["GATE-3"]["reason"] and "expected: waiting in PreBind" in req["GATE-3"]["reason"]
    assert req["GATE-1"]["outcome"] == "passed", req["GATE-1"]  # only what the variant breaks fails
    assert outcome.result == "failure"


@pytest.mark.usefixtures("gate_can_be_off")
def test_objects_restored_while_the_gate_is_off_fail_gate_1_and_gate_2(
    tmp_path: Path, k8s_version: KubeVersion
) -> None:
    outcome = run_gates(k8s_version, tmp_path / "r", variant="recreate-while-off")
    req = _outcomes(outcome.out)
    assert req["GATE-2"]["outcome"] == "failed" and "lost fields" in req["GATE-2"]["reason"], req["GATE-2"]
    assert req["GATE-1"]["outcome"] == "failed" and "bound-0" in req["GATE-1"]["reason"], req["GATE-1"]


def test_an_older_scheduler_without_the_gate_fails_skew_1(tmp_path: Path, k8s_version: KubeVersion) -> None:
    older = _older(k8s_version)
    outcome = run_upgrade(older, k8s_version, tmp_path / "r", variant="skew-gate-off")
    req = _outcomes(outcome.out)
    assert req["SKEW-1"]["outcome"] == "failed", req["SKEW-1"]
    assert req["UPG-2"]["outcome"] == "failed" and "bound without its binding conditions" in req["UPG-2"]["reason"]


def test_a_downgrade_that_drops_the_fields_fails_upg_1(tmp_path: Path, k8s_version: KubeVersion) -> None:
    older = _older(k8s_version)
    outcome = run_upgrade(older, k8s_version, tmp_path / "r", variant="downgrade-drops-fields")
    req = _outcomes(outcome.out)
    assert req["UPG-1"]["outcome"] == "failed" and "lost fields" in req["UPG-1"]["reason"], req["UPG-1"]
    assert req["SKEW-1"]["outcome"] == "passed", req["SKEW-1"]
