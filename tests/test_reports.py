"""Per-requirement outcomes and the reports built from them (no cluster)."""

import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from conformance.report.catalogue import CATALOGUE, SUITE_REQUIREMENTS
from conformance.report.outcomes import (
    Outcomes,
    RunResult,
    verdict,
    write_certification_junit,
    write_conformance_report,
)


def test_a_requirement_takes_the_worst_outcome_of_its_tests_and_phases() -> None:
    outcomes = Outcomes()
    outcomes.add("API-1", RunResult("t1", "passed", seconds=1.0))
    outcomes.add("API-1", RunResult("t1", "failed", "teardown: cleanup failed", 0.5))  # teardown of t1
    outcomes.add("API-1", RunResult("t2", "passed", seconds=2.0))
    outcomes.add("API-2", RunResult("t3", "skipped", "no fault injector in the profile"))
    summary = outcomes.summary()
    assert summary["API-1"]["outcome"] == "failed" and summary["API-1"]["reason"] == "teardown: cleanup failed"
    assert summary["API-1"]["seconds"] == 3.5 and summary["API-1"]["tests"] == ["t1", "t2"]
    assert summary["API-2"] == {**summary["API-2"], "outcome": "skipped", "reason": "no fault injector in the profile"}
    assert summary["SCH-1"]["outcome"] == "not-covered"
    assert list(summary) == [r.id for r in SUITE_REQUIREMENTS]


def test_a_passed_tests_note_is_its_requirements_reason() -> None:
    """A passed check may say what it accepted (IMP-9's declared rights): the report prints it."""
    outcomes = Outcomes()
    outcomes.add("IMP-9", RunResult("t1", "passed", "declared rights beyond the minimum: x"))
    outcomes.add("IMP-9", RunResult("t2", "passed"))
    outcomes.add("IMP-8", RunResult("t3", "passed", "a note"))
    outcomes.add("IMP-8", RunResult("t4", "skipped", "no restart command"))
    summary = outcomes.summary()
    assert (
        summary["IMP-9"]["outcome"] == "passed"
        and summary["IMP-9"]["reason"] == "declared rights beyond the minimum: x"
    )
    assert (
        summary["IMP-8"]["outcome"] == "partial"
        and summary["IMP-8"]["reason"] == "t4 skipped: no restart command; a note"
    )


def test_verdict() -> None:
    passed = {rid: {"level": r.level, "outcome": "passed"} for rid, r in CATALOGUE.items()}
    assert verdict(passed) == "success"
    assert verdict({**passed, "IMP-7": {"level": "SHOULD", "outcome": "skipped"}}) == "success"
    assert verdict({**passed, "SCH-1": {"level": "MUST", "outcome": "not-covered"}}) == "partial"
    assert verdict({**passed, "IMP-7": {"level": "SHOULD", "outcome": "failed"}}) == "failure"


def test_reports_have_one_entry_per_requirement(tmp_path: Path) -> None:
    outcomes = Outcomes()
    outcomes.add("API-2", RunResult("t", "failed", "expected 422, got 201"))
    summary = outcomes.summary()
    write_conformance_report(tmp_path / "r.yaml", summary, {"implementation": {"profile": "x"}})
    write_certification_junit(tmp_path / "c.xml", summary, "suite")
    report = yaml.safe_load((tmp_path / "r.yaml").read_text())
    assert report["kind"] == "ConformanceReport" and report["result"] == "failure"
    assert report["totals"] == {"failed": 1, "not-covered": len(SUITE_REQUIREMENTS) - 1}
    cases = list(ET.parse(tmp_path / "c.xml").getroot().iter("testcase"))
    assert len(cases) == len(SUITE_REQUIREMENTS)
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name").split()[0] for c in failed] == ["API-2"]
    assert failed[0].find("failure").get("message") == "expected 422, got 201"
