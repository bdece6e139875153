"""A cluster that runs other settings than it declares is caught (BASE-2, SCH-6), with declared and measured named in
the first line of the failure: the local provider's selftest-only knobs
(conformance/cluster/providers/local/scheduler.py SELFTEST_*) configure kube-scheduler otherwise while the cluster
still declares what the suite asked for.

Runs the real suite in a subprocess on its own local cluster: run it through the shared cluster slots.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conformance.cluster.providers.local import SELFTEST_SCHEDULER_GATES_ENV, SELFTEST_SCHEDULER_TIMEOUT_ENV
from selftest.suite_runner import run_suite

SETTINGS_TESTS = (
    "conformance/suite/cluster/test_running_settings.py",
    "conformance/suite/cluster/test_binding_timeout.py",
)


def _failures(reports: Path) -> dict[str, str]:
    """Requirement id -> the first line of its failure message in the certification JUnit."""
    out = {}
    for case in ET.parse(reports / "certification-junit.xml").getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is not None:
            out[case.get("name", "").split()[0]] = (failure.get("message") or "").splitlines()[0]
    return out


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[dict[str, str], dict, str]:
    reports = tmp_path / "reports"
    code, out, _ = run_suite(
        tmp_path / "junit.xml",
        "--profile",
        "none",
        "--binding-timeout",
        "20",
        f"--reports-dir={reports}",
        SETTINGS_TESTS[1],
        target=SETTINGS_TESTS[0],
        env={**os.environ, **env},
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    report = yaml.safe_load((reports / "conformance-report.yaml").read_text())
    return _failures(reports), report, out


def test_a_scheduler_running_another_binding_timeout_fails_base_2_and_sch_6(tmp_path: Path) -> None:
    """Declared 20 s, kube-scheduler configured with 35 s."""
    failures, report, out = _run(tmp_path, {SELFTEST_SCHEDULER_TIMEOUT_ENV: "35"})
    assert failures.get("BASE-2", "").startswith("AssertionError: binding timeout declared 20s, measured 3"), (
        failures,
        out[-3000:],
    )
    assert "binding timeout declared 20s, the allocation was cleared" in failures.get("SCH-6", ""), failures
    assert "later than" in failures["SCH-6"], failures
    settings = report["cluster"]["settings"]
    assert settings["declared"]["bindingTimeoutSeconds"] == 20
    assert settings["measured"]["bindingTimeout"]["timeoutEventAfterSeconds"] >= 35, settings


@pytest.mark.usefixtures("gate_can_be_off")
def test_a_gate_off_in_kube_scheduler_only_fails_base_2_naming_the_component(tmp_path: Path) -> None:
    """kube-apiserver runs DRADeviceBindingConditions, kube-scheduler does not: the gauge of the scheduler tells."""
    failures, report, out = _run(tmp_path, {SELFTEST_SCHEDULER_GATES_ENV: "DRADeviceBindingConditions=false"})
    assert failures.get("BASE-2", "").startswith(
        "AssertionError: kube-scheduler: DRADeviceBindingConditions declared on, runs off"
    ), (failures, out[-3000:])
    measured = report["cluster"]["settings"]["measured"]
    assert measured["kube-scheduler"]["featureGates"]["DRADeviceBindingConditions"] is False, measured
    assert measured["kube-apiserver"]["featureGates"]["DRADeviceBindingConditions"] is True, measured
