"""The suite's API checks fail on a cluster that breaks what they check (binding-condition gate off).

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries: `make
binaries`), so this is a test of the tests: a check that passes on a broken cluster would be worthless.
"""

from __future__ import annotations

from pathlib import Path

from selftest.suite_runner import profile_variant, run_suite


def test_api_checks_fail_with_the_binding_conditions_gate_off(tmp_path: Path) -> None:
    code, out, _ = run_suite(
        tmp_path / "junit.xml",
        "--feature-gates",
        "DRADeviceBindingConditions=false",
        target="conformance/suite/test_api_binding_fields.py",
    )
    assert code == 1, f"expected test failures (exit 1), got exit {code}:\n{out[-3000:]}"
    assert "2 failed" in out, out[-3000:]
    assert "did not keep the binding fields" in out
    assert "DID NOT RAISE" in out  # five binding conditions accepted: fields dropped instead of validated


def test_attach_before_bind_catches_conditions_reported_before_the_attach(tmp_path: Path) -> None:
    """The reference controller's deliberately broken mode reports `attached` when the attach starts: IMP-3 fails."""
    profile = profile_variant(
        tmp_path, '"--mode", "keep-in-pool"]', '"--mode", "keep-in-pool", "--broken-report-before-attach"]'
    )
    code, out, _ = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/test_attach_before_bind.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert "FAILED conformance/suite/test_attach_before_bind.py::test_conditions_true_only_after_the_attach" in out
    assert "True while the fabric says attached to None" in out
