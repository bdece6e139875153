"""The release matrix from per-release conformance reports (synthetic reports: no cluster)."""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.report.catalogue import SUITE_REQUIREMENTS
from conformance.report.matrix import Matrix, load_run, write_matrix


def _report(folder: Path, outcomes: dict[str, tuple[str, str]], result: str = "success") -> Path:
    requirements = {
        req.id: {"level": req.level, "outcome": outcomes.get(req.id, ("passed", ""))[0]} for req in SUITE_REQUIREMENTS
    }
    for req_id, (_, reason) in outcomes.items():
        requirements[req_id]["reason"] = reason
    folder.mkdir(parents=True)
    document = {"result": result, "totals": {"passed": 1}, "cluster": {"bringUpSeconds": 6.0}, "wallSeconds": 70.0}
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump({**document, "requirements": requirements}))
    return folder


def test_each_cell_has_the_release_outcome_and_reason(tmp_path: Path) -> None:
    reason = "Kubernetes 1.34 has a fixed 600 s binding timeout"
    runs = [
        load_run("1.34.4", _report(tmp_path / "1.34.4", {"SCH-6": ("skipped", reason)}), run_seconds=80.0),
        load_run("1.38.0-beta.0", _report(tmp_path / "1.38.0-beta.0", {})),
    ]
    matrix = Matrix(runs, profile="reference")
    doc = matrix.document()
    assert doc["requirements"]["SCH-6"]["releases"]["1.34.4"] == {"outcome": "skipped", "reason": reason}
    assert doc["requirements"]["SCH-6"]["releases"]["1.38.0-beta.0"]["outcome"] == "passed"
    assert [r["release"]["bindingConditionsGate"] for r in doc["releases"]] == [
        "alpha, turned on by the suite",
        "GA, locked on",
    ]
    assert matrix.result == "success"
    paths = write_matrix(matrix, tmp_path / "out")
    text = paths["markdown"].read_text()
    assert reason in text and "| 1.34.4 | 1.38.0-beta.0 |" in text
    assert reason in paths["html"].read_text()
    assert yaml.safe_load(paths["yaml"].read_text())["result"] == "success"


def test_a_release_without_a_report_fails_the_matrix_in_every_cell(tmp_path: Path) -> None:
    run = load_run("1.36.3", tmp_path / "missing", exit_code=3, note="pytest exit 3, no report: cannot start")
    matrix = Matrix([run])
    assert matrix.result == "failure"
    assert {c["outcome"] for c in matrix.document()["requirements"]["API-1"]["releases"].values()} == {"error"}
    assert "cannot start" in matrix.document()["requirements"]["API-1"]["releases"]["1.36.3"]["reason"]


def test_a_skip_without_a_reason_is_named_and_makes_the_matrix_partial(tmp_path: Path) -> None:
    runs = [load_run("1.37.2", _report(tmp_path / "1.37.2", {"IMP-7": ("skipped", "")}))]
    matrix = Matrix(runs)
    assert matrix.unexplained() == ["IMP-7 on 1.37.2"]
    assert matrix.result == "partial"


def test_a_passed_requirement_says_what_was_skipped_or_not_asserted_on_the_release(tmp_path: Path) -> None:
    folder = _report(tmp_path / "1.34.4", {})
    (folder / "junit.xml").write_text(
        '<testsuites><testsuite><testcase classname="conformance.suite.implementation.test_privilege" '
        'name="test_b"><skipped message="no per-driver check on 1.34"/></testcase></testsuite></testsuites>'
    )
    report = yaml.safe_load((folder / "conformance-report.yaml").read_text())
    report["requirements"]["IMP-9"]["tests"] = [
        "conformance/suite/implementation/test_privilege.py::test_a",
        "conformance/suite/implementation/test_privilege.py::test_b",
    ]
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump(report))
    run = load_run("1.34.4", folder)
    assert run.cell("IMP-9") == {"outcome": "passed", "reason": "1 of 2 tests skipped: no per-driver check on 1.34"}
    assert "NominatedNodeNameForExpectation" in run.cell("SCH-3")["reason"]
    assert load_run("1.35.4", _report(tmp_path / "1.35.4", {})).cell("SCH-3")["reason"] == ""


def test_a_partial_matrix_exits_distinctly_unless_accepted(tmp_path: Path) -> None:
    """The exit status tells the verdict: a partial matrix is not a silent 0 (the CLI, on reports already there)."""
    from click.testing import CliRunner

    from conformance.cli import main
    from conformance.report.verdict import EXIT_PARTIAL

    reason = "Kubernetes 1.34.4 fixes the binding timeout at 600s: too long to wait"
    _report(tmp_path / "1.34.4", {"SCH-6": ("skipped", reason)}, result="partial")
    args = ["matrix", "--report-only", "--release", "1.34.4", "--out", str(tmp_path)]
    partial = CliRunner().invoke(main, args)
    assert partial.exit_code == EXIT_PARTIAL, partial.output
    assert "--accept partial" in partial.output
    assert CliRunner().invoke(main, [*args, "--accept", "partial"]).exit_code == 0


def test_a_release_failed_only_on_an_accepted_known_defect_does_not_fail_the_exit_status(tmp_path: Path) -> None:
    """A run exits 0 on a failure only when every failure was a known defect it was told to accept (run.json holds
    its exit status); the column still reads failed. A failed run whose own exit status was not 0 fails the matrix."""
    import json

    from click.testing import CliRunner

    from conformance.cli import main
    from conformance.report.matrix import RUN_RECORD

    defect = "double-allocation-after-binding-timeout"
    folder = _report(tmp_path / "1.37.2", {"SCH-9": ("failed", "allocated twice")}, result="failure")
    (folder / RUN_RECORD).write_text(json.dumps({"exit_code": 0, "run_seconds": 90.0}))
    args = ["matrix", "--report-only", "--release", "1.37.2", "--out", str(tmp_path)]
    accepted = CliRunner().invoke(main, [*args, "--accept", f"known-defect:{defect}"])
    assert accepted.exit_code == 0, accepted.output
    assert "matrix: failure" in accepted.output and "accepted known upstream defects" in accepted.output
    (folder / RUN_RECORD).write_text(json.dumps({"exit_code": 7, "run_seconds": 90.0}))  # the run did not accept it
    refused = CliRunner().invoke(main, [*args, "--accept", f"known-defect:{defect}"])
    assert refused.exit_code == 1 and "1.37.2 failed" in refused.output, refused.output
    typo = CliRunner().invoke(main, [*args, "--accept", "known-defect:no-such-defect"])
    assert typo.exit_code == 2 and "unknown known defect" in typo.output, typo.output
