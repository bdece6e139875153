"""The docs quote the run's headline exactly as a run prints it (design: "the docs quote exactly what a run prints").

Each quoted headline of README.md and docs/*.md is rendered here from a synthetic outcome set with the code the
requirement reporter ends a run with (report/headline.py `conclude`, whose headline the terminal prints last), or is
what `profile check` of the short template ends with; every headline-shaped quote in the docs must be one of them, so
a changed catalogue or wording shows here first.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.cli.run import status_line
from conformance.implementation.profile import TEMPLATE_FILE, load_profile
from conformance.report.catalogue import SUITE_REQUIREMENTS
from conformance.report.headline import conclude, run_headline
from conformance.report.outcomes import Outcomes, RunResult
from conformance.report.verdict import NOT_CERTIFIED, Verdict, subject_of
from conformance.suite.profilecheck import check

ROOT = Path(__file__).resolve().parents[1]
DEFECT = "double-allocation-after-binding-timeout"
ACCEPTED = [f"known-defect:{DEFECT}"]  # what `make conformance` passes (ACCEPT_KNOWN_DEFECTS)
QUOTE = re.compile(r"implementation: [^`]*? · exit \d+(?: \(--accept partial(?:: exit 0)?\))?")
PREDICTION = "if every requirement that runs passes, the run ends: "


def _headline(model: str | None, accept: list[str], skipped: tuple[str, ...] = ()) -> str:
    """A run on 1.37.2 as the docs describe it: SCH-9 failed by the known defect, `skipped` skipped, the rest passed
    (a run without a profile: every implementation requirement skipped)."""
    outcomes = Outcomes()
    for req in SUITE_REQUIREMENTS:
        if req.not_applicable(model):
            continue
        if req.id == "SCH-9":
            outcomes.add(req.id, RunResult("t::sch_9", "failed", "held twice", known_defect=DEFECT))
        else:
            unprofiled = model is None and subject_of(req.id) == "implementation"
            outcome = "skipped" if req.id in skipped or unprofiled else "passed"
            outcomes.add(req.id, RunResult(f"t::{req.id}", outcome, "why"))
    none = "no implementation profile" if model is None else None
    summary = outcomes.summary(not_certified=none, model=model)
    return conclude(summary, accept, pytest_status=1, not_certified=none, model=model).headline


def _template_prediction() -> str:
    """What `profile check` of the short template (`profile init`) ends with, from its prefix on."""
    last = check(load_profile(TEMPLATE_FILE)).verdict[-1]
    return last.removeprefix(PREDICTION)


EXPECTED = {  # headline -> the docs that must quote it
    _headline("keep-in-pool", ACCEPTED, ("IMP-7",)): [
        "README.md",
        "docs/getting-started.md",
        "docs/certify.md",
        "docs/reports.md",
    ],
    _headline("keep-in-pool", [], ("IMP-7",)): ["README.md"],
    _headline("node-local", ACCEPTED): ["docs/certify.md"],
    _headline(None, ACCEPTED): ["docs/certify.md"],
    _template_prediction(): ["docs/certify.md"],
}


def _docs() -> dict[str, str]:
    """The docs' text with line breaks as spaces (a quote may wrap)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {str(f.relative_to(ROOT)): " ".join(f.read_text().split()) for f in files}


def test_the_headline_of_an_accepted_known_defect_says_failure_and_exit_0() -> None:
    assert _headline("keep-in-pool", ACCEPTED, ("IMP-7",)) == (
        "implementation: success (8 not applicable) · cluster: failure, only known upstream defect SCH-9 (accepted) · "
        "exit 0"
    )
    assert _headline("keep-in-pool", [], ("IMP-7",)).endswith("SCH-9 (not accepted) · exit 7")


@pytest.mark.parametrize("headline", list(EXPECTED))
def test_the_docs_quote_the_headline_as_a_run_prints_it(headline: str) -> None:
    docs = _docs()
    missing = [name for name in EXPECTED[headline] if headline not in docs[name]]
    assert not missing, f"{missing} do not quote {headline!r}"


def test_every_headline_the_docs_quote_is_one_a_run_prints() -> None:
    quoted = {(name, q) for name, text in _docs().items() for q in QUOTE.findall(text)}
    stale = sorted((name, q) for name, q in quoted if q not in EXPECTED)
    assert not stale, f"quoted headlines no run prints (rendered: {list(EXPECTED)}): {stale}"


def test_the_run_commands_last_line_is_quoted_as_it_prints() -> None:
    for name, text in _docs().items():
        for line, code in re.findall(r"(dra-conformance run: exit status (\d+) \([^)\n]*\))", text):
            printed = {status_line(int(code)), status_line(int(code), "(accepted)")}
            assert line in printed, f"{name} quotes a run command line other than it prints: {line}"


def test_headline_forms() -> None:
    """partial, failure with and without known defects, not certified, --accept partial."""
    summary = {
        "IMP-1": {"level": "MUST", "outcome": "failed", "area": "implementation"},
        "IMP-2": {"level": "MUST", "outcome": "not-judged", "area": "implementation"},
        "SCH-3": {"level": "MUST", "outcome": "failed", "area": "scheduler"},
        "SCH-9": {"level": "MUST", "outcome": "failed", "area": "scheduler", "knownDefects": [DEFECT]},
    }
    found = {
        "implementation": Verdict("implementation", "failure"),
        "cluster": Verdict("cluster", "failure"),
    }
    assert run_headline(found, summary, {DEFECT}, 1) == (
        "implementation: failure (IMP-1 failed) · cluster: failure (SCH-3 failed; known upstream defect SCH-9) · exit 1"
    )
    partial = {"IMP-2": summary["IMP-2"], "IMP-1": {**summary["IMP-1"], "outcome": "passed"}}
    found = {"implementation": Verdict("implementation", "partial"), "cluster": Verdict("cluster", NOT_CERTIFIED)}
    assert run_headline(found, partial, set(), 0, accept_partial=True) == (
        "implementation: partial (IMP-2 not shown to pass) · cluster: not certified · exit 0 (--accept partial)"
    )
