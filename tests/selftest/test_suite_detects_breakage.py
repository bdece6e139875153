"""The suite's API checks fail on a cluster that breaks what they check (binding-condition gate off).

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries: `make
binaries`), so this is a test of the tests: a check that passes on a broken cluster would be worthless.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import main
from selftest.suite_runner import profile_variant, run_suite


@pytest.mark.usefixtures("gate_can_be_off")
def test_api_checks_fail_with_the_binding_conditions_gate_off(tmp_path: Path) -> None:
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml",
        "--feature-gates",
        "DRADeviceBindingConditions=false",
        "conformance/suite/cluster/test_api_validation.py",
        target="conformance/suite/cluster/test_api_binding_fields.py",
    )
    assert code == 1, f"expected test failures (exit 1), got exit {code}:\n{out[-3000:]}"
    assert "did not keep the binding fields" in out
    assert "DID NOT RAISE" in out  # invalid lists accepted: fields dropped instead of validated

    def of(*prefixes: str) -> set[str]:
        picked = {kind for name, kind in outcomes.items() if name.startswith(prefixes)}
        assert picked, f"no test case named {prefixes}: {sorted(outcomes)}"
        return picked

    # API-1..API-4 need the binding fields kept; API-5/API-6 (claim status rules) do not depend on this gate.
    gated = of("test_slice_", "test_binding_and_failure_", "test_malformed_", "test_qualified_")
    assert gated == {"failure"}, f"an API-1..4 check passed with the fields dropped: {outcomes}"
    assert of("test_status_of_", "test_deallocation_", "test_allocation_") == {"passed"}, outcomes


def _broken_profile(tmp_path: Path, flag: str) -> Path:
    """A copy of the reference profile whose controller runs with one of its deliberately broken flags."""
    return profile_variant(tmp_path, '"--mode", "keep-in-pool"]', f'"--mode", "keep-in-pool", "{flag}"]')


def test_attach_before_bind_catches_conditions_reported_before_the_attach(tmp_path: Path) -> None:
    """The reference controller's deliberately broken mode reports `attached` when the attach starts: IMP-3 fails,
    and the evidence shows it: the certification JUnit and the HTML page carry the assertion's message, the
    timeline has the conditions ready before the fabric's attach, and the bundle renders again."""
    profile = _broken_profile(tmp_path, "--broken-report-before-attach")
    reports = tmp_path / "reports"
    code, out, _ = run_suite(
        tmp_path / "junit.xml",
        "--profile",
        str(profile),
        f"--reports-dir={reports}",
        target="conformance/suite/implementation/test_attach_before_bind.py",
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert (
        "FAILED conformance/suite/implementation/test_attach_before_bind.py::test_conditions_true_only_after_the_attach"
        in out
    )
    message = "True while the fabric says"
    assert message in out
    case = next(
        c
        for c in ET.parse(reports / "certification-junit.xml").getroot().iter("testcase")
        if c.get("name").startswith("IMP-3 ")
    )
    failure = case.find("failure")
    assert failure is not None and message in failure.get("message"), ET.tostring(case)
    assert "conditions ready" in failure.text and "fabric attached" in failure.text, failure.text
    timeline = json.loads((reports / "timelines" / "attach-before-bind.json").read_text())
    moments = {m["what"]: m["t"] for m in reversed(timeline["moments"])}  # the first of each
    assert moments["conditions ready"] < moments["fabric attached"], timeline["moments"]
    page = (reports / "report.html").read_text()
    assert message in page and "<svg" in page and 'href="timelines/attach-before-bind.svg"' in page
    rendered = CliRunner().invoke(main, ["report", str(reports / "results.tar.gz"), "--out", str(tmp_path / "again")])
    assert rendered.exit_code == 0, rendered.output
    assert message in (tmp_path / "again" / "report.html").read_text()


def _attach_failure_fails(tmp_path: Path, flag: str, test: str) -> str:
    """Run the attach-failure scenario against the controller broken by `flag`; `test` must fail. Its output."""
    profile = _broken_profile(tmp_path, flag)
    code, out, _ = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_failure.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert f"FAILED conformance/suite/implementation/test_failure.py::{test}" in out, out[-3000:]
    return out


def test_attach_failure_catches_a_failed_device_offered_again(tmp_path: Path) -> None:
    """The controller leaves a device whose attach failed in its pool, untainted: IMP-4 fails."""
    test = "test_attach_failure_is_reported_and_the_device_not_offered_again"
    out = _attach_failure_fails(tmp_path, "--broken-offer-failed-device", test)
    assert "was offered free" in out or "was allocated again" in out, out[-3000:]


def test_attach_failure_catches_a_missing_failure_condition(tmp_path: Path) -> None:
    """The controller never sets a failure condition when the attach fails: IMP-4 fails."""
    test = "test_attach_failure_is_reported_and_the_device_not_offered_again"
    out = _attach_failure_fails(tmp_path, "--broken-no-failure-condition", test)
    assert "no allocation showed a failure condition True" in out, out[-3000:]


def test_attach_failure_catches_a_quarantine_a_few_seconds_late(tmp_path: Path) -> None:
    """The controller reports the failure but hides the failed device only 10 s later: between the scheduler's
    deallocation and the taint the device is offered free, which the record shows at its revision (IMP-4)."""
    test = "test_attach_failure_is_reported_and_the_device_not_offered_again"
    out = _attach_failure_fails(tmp_path, "--broken-late-quarantine", test)
    assert "the device came back" in out, out[-3000:]
    assert "offered free from revision" in out or "allocated again at revision" in out, out[-3000:]


def test_attach_failure_catches_a_failed_counted_device_reassigned(tmp_path: Path) -> None:
    """Count-based pools: the controller gives the device whose attach failed to the claim's next count entry. Entries
    have no identity; the fabric probe shows that device attached to the node again (IMP-4)."""
    test = "test_attach_failure_is_reported_and_the_device_not_offered_again"
    counted = '"--fabric-entries", "counted"]'
    flag = '"--fabric-entries", "counted", "--broken-reassign-failed-device"]'
    profile = profile_variant(tmp_path, counted, flag, source="reference-counted.yaml")
    code, out, _ = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_failure.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert f"FAILED conformance/suite/implementation/test_failure.py::{test}" in out, out[-3000:]
    assert "the device came back" in out, out[-3000:]
    assert "again in the probe's answer" in out or "allocated again at revision" in out, out[-3000:]
