"""The two verdicts of a run (cluster, implementation), their reasons, and the exit status that tells them.

The cluster (kube-apiserver, kube-scheduler of one release) is certified by BASE-*, API-* and SCH-*; the
implementation by IMP-* and SCALE-1 (design.md, "Two things are certified, separately"). Each verdict is
`failure` (a requirement failed), `partial` (a MUST was not shown to pass: skipped, only partly run, not covered)
or `success`; a run without a profile does not certify an implementation at all (`not-certified`).

pytest's exit status says the verdict, so CI cannot read a partial run as a pass: 0 success, 1 failure,
EXIT_PARTIAL for partial unless the run was started with `--accept partial` (a profile that knowingly lacks a
capability, or a run of a subset of the suite).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.report.catalogue import CATALOGUE
from conformance.report.reasons import headline

EXIT_FAILURE = 1
EXIT_PARTIAL = 6  # pytest uses 0-5; 6 is free
CLUSTER_AREAS = ("baseline", "api", "scheduler")
IMPLEMENTATION_AREAS = ("implementation", "scale")
NOT_CERTIFIED = "not-certified"


@dataclass
class Verdict:
    """One verdict and why: every requirement that was not shown to pass, worst first."""

    subject: str  # "cluster" or "implementation"
    result: str  # success, partial, failure, not-certified
    reasons: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"result": self.result, "reasons": self.reasons, "counts": self.counts}


def _subject(requirement: str) -> str:
    return "cluster" if CATALOGUE[requirement].area in CLUSTER_AREAS else "implementation"


def judge(summary: dict[str, dict[str, Any]], subject: str, *, not_certified: str | None = None) -> Verdict:
    """The verdict of `subject` from the per-requirement summary; `not_certified` gives the reason a run certifies
    no implementation (then its IMP-* outcomes are listed as not checked, and the result is not-certified)."""
    entries = {rid: e for rid, e in summary.items() if _subject(rid) == subject}
    counts: dict[str, int] = {}
    for e in entries.values():
        counts[e["outcome"]] = counts.get(e["outcome"], 0) + 1
    if not_certified is not None:
        return Verdict(subject, NOT_CERTIFIED, [f"the implementation was not certified: {not_certified}"], counts)
    failed = [rid for rid, e in entries.items() if e["outcome"] == "failed"]
    missing = [rid for rid, e in entries.items() if e["level"] == "MUST" and e["outcome"] != "passed"]
    optional = [rid for rid, e in entries.items() if e["level"] != "MUST" and e["outcome"] not in ("passed", "failed")]
    reasons = [f"{rid} {entries[rid]['level']} {entries[rid]['outcome']}: {_headline(entries[rid])}" for rid in failed]
    reasons += _grouped(entries, [rid for rid in missing if rid not in failed], "")
    reasons += _grouped(entries, optional, " (does not change the verdict)")
    result = "failure" if failed else "partial" if missing else "success"
    return Verdict(subject, result, reasons, counts)


def _grouped(entries: dict[str, dict[str, Any]], ids: list[str], note: str) -> list[str]:
    """One line per requirement, except that requirements with the same outcome and reason share one line (a run
    of one file leaves twenty requirements not covered for the same reason)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for rid in ids:
        e = entries[rid]
        groups.setdefault((e["level"], e["outcome"], _headline(e)), []).append(rid)
    return [f"{', '.join(rids)} {level} {outcome}{note}: {why}" for (level, outcome, why), rids in groups.items()]


def _headline(entry: dict[str, Any]) -> str:
    return headline(str(entry.get("reason") or "")) or "(no reason recorded)"


def verdicts(summary: dict[str, dict[str, Any]], *, no_implementation: str | None = None) -> dict[str, Verdict]:
    return {
        "cluster": judge(summary, "cluster"),
        "implementation": judge(summary, "implementation", not_certified=no_implementation),
    }


def overall(found: dict[str, Verdict]) -> str:
    """The run's result: the worst verdict among those certified."""
    results = [v.result for v in found.values() if v.result != NOT_CERTIFIED]
    for worst in ("failure", "partial"):
        if worst in results:
            return worst
    return "success"


def exit_status(result: str, pytest_status: int, accept: set[str]) -> int:
    """The exit status for a run's result: pytest's own non-zero status wins (interrupted, usage, internal);
    a failure is 1 even if pytest saw none (a requirement failed in a report phase); partial is EXIT_PARTIAL
    unless accepted."""
    if pytest_status not in (0, EXIT_FAILURE):
        return pytest_status
    if result == "failure":
        return EXIT_FAILURE
    if pytest_status:
        return pytest_status
    if result == "partial" and "partial" not in accept:
        return EXIT_PARTIAL
    return 0
