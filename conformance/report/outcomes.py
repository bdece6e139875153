"""Per-requirement outcomes of a run and the reports built from them.

conformance-report.yaml (in the spirit of Gateway API's ConformanceReport) and a certification JUnit file with one
test case per catalogue requirement (junit-xml), for review tools that read a verdict per KEP requirement.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from junit_xml import TestCase, TestSuite, to_xml_report_string

from conformance.report.catalogue import CATALOGUE, KEP_URL, SUITE_REQUIREMENTS
from conformance.report.reasons import headline
from conformance.report.verdict import (
    IMPLEMENTATION_AREAS,
    NOT_APPLICABLE,
    NOT_JUDGED,
    Verdict,
    overall,
    shown_outcome,
)

# Worst first: a requirement takes the worst outcome of its tests (passed with any not judged or skipped: partial).
_RANK = {"failed": 0, "passed": 1, NOT_JUDGED: 2, "skipped": 3, NOT_APPLICABLE: 4}
# A passed test's note for its requirement's reason (pytest's record_property(NOTE_PROPERTY, text)): what it accepted.
NOTE_PROPERTY = "requirement_note"
NOT_RUN = "no test of this requirement ran in this run (no scenario in this suite version, or not collected)"
# The skip reason of a test whose requirement does not apply to the profile's binding model (pytest has no outcome of
# its own for it): the reports read it back as `not-applicable`, never as skipped.
NOT_APPLICABLE_PREFIX = "not applicable: "


# The skip reason of a test whose scenario failed before its evidence existed (suite/judged.py): read back as
# `not-judged`.
NOT_JUDGED_PREFIX = "not judged: "
PHASE_PROPERTY = "phase"  # the phase a test was judged in (suite/phases.py): in its requirement's `judgedIn`


def not_applicable_reason(skip_reason: str) -> str | None:
    """The not-applicable reason of a test's skip reason, or None (an ordinary skip)."""
    text = skip_reason.removeprefix("Skipped: ")
    return text.removeprefix(NOT_APPLICABLE_PREFIX) if text.startswith(NOT_APPLICABLE_PREFIX) else None


def skip_outcome(skip_reason: str) -> tuple[str, str]:
    """A skipped test's outcome and reason: not-applicable, not-judged (the prefix of each cut), or skipped."""
    text = skip_reason.removeprefix("Skipped: ")
    for prefix, outcome in ((NOT_APPLICABLE_PREFIX, NOT_APPLICABLE), (NOT_JUDGED_PREFIX, NOT_JUDGED)):
        if text.startswith(prefix):
            return outcome, text.removeprefix(prefix)
    return "skipped", skip_reason


@dataclass
class RunResult:
    nodeid: str
    outcome: str  # passed, failed, skipped, not-judged, not-applicable
    reason: str = ""
    seconds: float = 0.0
    evidence: list[str] = field(default_factory=list)  # reports-relative paths (timeline, objects) of this test
    known_defect: str | None = None  # a failure whose symptom is this known upstream defect's (the test says so)
    phase: str = ""  # the phase it was judged in (PHASE_PROPERTY)


@dataclass
class Outcomes:
    """Test results grouped by requirement id, filled from pytest's reports."""

    by_requirement: dict[str, list[RunResult]] = field(default_factory=dict)
    deselected: dict[str, list[str]] = field(default_factory=dict)  # requirement -> tests left out by -k/-m

    def add(self, requirement: str, result: RunResult) -> None:
        results = self.by_requirement.setdefault(requirement, [])
        for i, seen in enumerate(results):
            if seen.nodeid == result.nodeid:  # setup, call and teardown of one test: keep the worst
                if _RANK[result.outcome] < _RANK[seen.outcome]:
                    evidence = seen.evidence + [e for e in result.evidence if e not in seen.evidence]
                    results[i] = RunResult(
                        result.nodeid,
                        result.outcome,
                        result.reason,
                        seen.seconds + result.seconds,
                        evidence,
                        result.known_defect,
                        result.phase or seen.phase,
                    )
                else:
                    seen.seconds += result.seconds
                return
        results.append(result)

    def summary(self, not_certified: str | None = None, model: str | None = None) -> dict[str, dict[str, Any]]:
        """Every catalogue requirement with its outcome: passed, failed, skipped, not-judged (its scenario failed
        before its evidence existed), partial (some of its tests passed, others were skipped or not judged: not
        everything it names was shown), not-covered, or not-applicable (it does not apply to the profile's binding
        model `model`: its tests were not run)."""
        out: dict[str, dict[str, Any]] = {}
        for req in SUITE_REQUIREMENTS:
            results = self.by_requirement.get(req.id, [])
            if not_certified is None and (why := req.not_applicable(model)):
                entry: dict[str, Any] = {"outcome": NOT_APPLICABLE, "reason": why}
                if results:
                    entry["tests"] = [r.nodeid for r in results]
            elif not results:
                left_out = self.deselected.get(req.id)
                reason = f"not selected in this run ({len(left_out)} tests deselected)" if left_out else NOT_RUN
                if not_certified and req.area in IMPLEMENTATION_AREAS:
                    reason = not_certified
                entry = {"outcome": "not-covered", "reason": reason}
            else:
                worst = min(results, key=lambda r: _RANK[r.outcome])
                skipped = [r for r in results if r.outcome in ("skipped", NOT_JUDGED)]
                outcome, reason = worst.outcome, worst.reason
                notes = [r.reason for r in results if r.outcome == "passed" and r.reason]  # what passes accepted
                if outcome == "passed":
                    reason = "; ".join(notes)
                if outcome == "passed" and skipped:
                    outcome = "partial"
                    left = [f"{r.nodeid.rsplit('::', 1)[-1]} {_words(r.outcome)}: {r.reason}" for r in skipped]
                    reason = "; ".join([*left, *notes])
                entry = {
                    "outcome": outcome,
                    "reason": reason,
                    "tests": [r.nodeid for r in results],
                    "seconds": round(sum(r.seconds for r in results), 2),
                }
                evidence = [e for r in results for e in r.evidence]
                if evidence:
                    entry["evidence"] = list(dict.fromkeys(evidence))
                if phases := list(dict.fromkeys(r.phase for r in results if r.phase)):
                    entry["judgedIn"] = ", ".join(phases)
                failed = [r for r in results if r.outcome == "failed"]
                if failed and all(r.known_defect for r in failed):  # one unexplained failure: a new failure
                    entry["knownDefects"] = sorted({r.known_defect for r in failed if r.known_defect})
                if seen := sorted({r.known_defect for r in results if r.outcome != "failed" and r.known_defect}):
                    entry["observedDefects"] = seen  # upstream behaviour the test saw, failing nothing
            out[req.id] = {"level": req.level, "area": req.area, "title": req.title, **entry}
        return out


def _words(outcome: str) -> str:
    return outcome.replace("-", " ")


def totals(summary: dict[str, dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in summary.values():
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    return counts


def verdict(summary: dict[str, dict[str, Any]]) -> str:
    """failure if any requirement failed; partial if a MUST was not shown to pass (not-applicable ones count out);
    else success."""
    if any(e["outcome"] == "failed" for e in summary.values()):
        return "failure"
    if any(e["level"] == "MUST" and e["outcome"] not in ("passed", NOT_APPLICABLE) for e in summary.values()):
        return "partial"
    return "success"


def write_conformance_report(
    path: Path,
    summary: dict[str, dict[str, Any]],
    run: dict[str, Any],
    found: dict[str, Verdict] | None = None,
    known: list[dict[str, Any]] | None = None,
) -> None:
    """The YAML report; `found` (the two verdicts) decides `result`, else the verdict over every requirement;
    `known`: the known upstream defects the run hit (knownDefects, next to the result: they never change it);
    `run["exit"]` (status, headline): the run's exit status and headline, written next to the result."""
    document = {
        "apiVersion": "conformance.dra.example.com/v1alpha1",
        "kind": "ConformanceReport",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kep": {"number": 5007, "url": KEP_URL},
        **{k: v for k, v in run.items() if k != "exit"},
        "result": overall(found) if found else verdict(summary),
        # what CI sees, and the one line that says both verdicts with it (report/headline.py)
        **({"exitStatus": ended["status"], "headline": ended["headline"]} if (ended := run.get("exit")) else {}),
        **({"knownDefects": known} if known else {}),
        **({"verdicts": {k: v.as_dict() for k, v in found.items()}} if found else {}),
        "totals": totals(summary),
        "requirements": summary,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")  # "·", "—" as is


def write_certification_junit(
    path: Path, summary: dict[str, dict[str, Any]], suite_name: str, accepted: set[str] | None = None
) -> None:
    """One case per requirement; a failure explained by a known upstream defect stays a failure, its message
    starting with the defect (and whether the run accepted it)."""
    cases = []
    for req_id, entry in summary.items():
        case = TestCase(
            f"{req_id} {entry['title']}",
            classname=f"KEP-5007.{CATALOGUE[req_id].area}",
            elapsed_sec=entry.get("seconds"),
        )
        evidence = "".join(f"\nevidence: {e}" for e in entry.get("evidence", []))
        evidence += f"\njudged in: {entry['judgedIn']}" if entry.get("judgedIn") else ""  # the phase (suite/phases.py)
        if entry["outcome"] == "failed":
            reason = entry["reason"] or "failed"
            known = entry.get("knownDefects") or []
            label = ""
            if known:
                taken = [k for k in known if k in (accepted or set())]
                label = f"[{shown_outcome(entry)}" + (f"; accepted: {', '.join(taken)}" if taken else "") + "] "
            case.add_failure_info(message=label + headline(reason), output=f"{label}{reason}{evidence}")
        elif entry["outcome"] in ("skipped", NOT_JUDGED, "not-covered", "partial", NOT_APPLICABLE):
            case.add_skipped_info(message=f"{entry['outcome']}: {headline(entry['reason'])}", output=entry["reason"])
            if entry["outcome"] == NOT_APPLICABLE:  # JUnit has no such outcome: a skip that says so, and a status
                case.status = NOT_APPLICABLE
        if evidence and entry["outcome"] != "failed":
            case.stdout = evidence.strip()
        cases.append(case)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_xml_report_string([TestSuite(suite_name, cases)]))


def table(summary: dict[str, dict[str, Any]]) -> list[str]:
    lines = [f"{'requirement':12} {'level':6} {'outcome':12} title"]
    lines += [f"{rid:12} {e['level']:6} {shown_outcome(e):12} {e['title']}" for rid, e in summary.items()]
    return lines


def not_shown(summary: dict[str, dict[str, Any]]) -> list[str]:
    """Every requirement not shown to pass, with the first line of its reason: what the terminal says loudly."""
    order = {"failed": 0, NOT_JUDGED: 1, "partial": 2, "skipped": 3, "not-covered": 4}
    rows = sorted(
        ((rid, e) for rid, e in summary.items() if e["outcome"] in order), key=lambda kv: order[kv[1]["outcome"]]
    )
    lines: list[str] = []
    shared: dict[tuple[str, str, str], list[str]] = {}
    for rid, e in rows:  # not-covered requirements with the same reason share one line
        if e["outcome"] == "not-covered":
            shared.setdefault((e["level"], e["outcome"], headline(e["reason"])), []).append(rid)
        else:
            lines.append(f"{rid:8} {e['level']:6} {shown_outcome(e):11} {headline(e['reason'])}")
    for (level, outcome, why), rids in shared.items():
        lines.append(f"{', '.join(rids)} {level} {outcome}: {why}")
    return lines


def not_applicable(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The requirements not applicable to the profile's binding model, each with why (what the terminal lists apart
    from what was not shown to pass)."""
    return [
        f"{rid:8} {e['level']:6} {headline(e['reason'])}"
        for rid, e in summary.items()
        if e["outcome"] == NOT_APPLICABLE
    ]
