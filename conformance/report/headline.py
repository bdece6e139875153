"""The run's headline: both verdicts and the exit status in one line, the last line of the terminal's summary and
the `headline` of conformance-report.yaml and report.html, so a reader takes from it what the exit status says
(design: "What a reader must be able to act on"; README "Verdicts and exit status" quotes it).

e.g. `implementation: success · cluster: failure, only known upstream defect SCH-9 (accepted) · exit 0`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.cluster.defects import accepted as accepted_defects
from conformance.report.verdict import (
    NOT_APPLICABLE,
    NOT_CERTIFIED,
    KnownFailures,
    Verdict,
    exit_status,
    overall,
    subject_of,
    verdicts,
)

SEPARATOR = " · "
MAX_IDS = 5  # requirement ids named per verdict; more are counted


def _ids(ids: list[str]) -> str:
    more = f" and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else ""
    return ", ".join(ids[:MAX_IDS]) + more


def verdict_part(verdict: Verdict, summary: dict[str, dict[str, Any]], accepted: set[str]) -> str:
    """One verdict in words: `cluster: failure, only known upstream defect SCH-9 (accepted)`, `implementation:
    partial (IMP-7 not shown to pass)`, `implementation: success (21 not applicable)`."""
    subject = verdict.subject + (" (patched control plane)" if verdict.patched else "")
    if verdict.result == NOT_CERTIFIED:
        return f"{subject}: not certified"
    entries = {rid: e for rid, e in summary.items() if subject_of(rid) == subject}
    failed = [rid for rid, e in entries.items() if e["outcome"] == "failed"]
    known = [rid for rid in failed if entries[rid].get("knownDefects")]
    other = [rid for rid in failed if rid not in known]
    missing = [
        rid
        for rid, e in entries.items()
        if e["level"] == "MUST" and e["outcome"] not in ("passed", "failed", NOT_APPLICABLE)
    ]
    unshown = f"; {_ids(missing)} not shown to pass" if missing else ""
    if verdict.result == "failure" and not other:
        taken = all(k in accepted for rid in known for k in entries[rid]["knownDefects"])
        plural = "s" if len(known) > 1 else ""
        return (
            f"{subject}: failure, only known upstream defect{plural} {_ids(known)} "
            f"({'accepted' if taken else 'not accepted'}){unshown}"
        )
    if verdict.result == "failure":
        also = f"; known upstream defect {_ids(known)}" if known else ""
        return f"{subject}: failure ({_ids(other)} failed{also})"
    if verdict.result == "partial":
        return f"{subject}: partial ({_ids(missing)} not shown to pass)"
    apart = f" ({len(verdict.not_applicable)} not applicable)" if verdict.not_applicable else ""
    return f"{subject}: {verdict.result}{apart}"


def run_headline(
    verdicts: dict[str, Verdict],
    summary: dict[str, dict[str, Any]],
    accepted: set[str],
    exit_status: int,
    accept_partial: bool = False,
) -> str:
    """The implementation's verdict, the cluster's, and the exit status (saying `--accept partial` where that made a
    partial run exit 0)."""
    parts = [verdict_part(verdicts[s], summary, accepted) for s in ("implementation", "cluster") if s in verdicts]
    partial = any(v.result == "partial" for v in verdicts.values())
    taken = " (--accept partial)" if exit_status == 0 and partial and accept_partial else ""
    return SEPARATOR.join([*parts, f"exit {exit_status}{taken}"])


@dataclass(frozen=True)
class Conclusion:
    """How a run ends: its verdicts, their worst (`result`), what the exit status knows of known defects, the exit
    status and the headline that says all of it."""

    verdicts: dict[str, Verdict]
    result: str
    known: KnownFailures
    exit_status: int
    headline: str


def conclude(
    summary: dict[str, dict[str, Any]],
    accept: list[str],
    *,
    pytest_status: int = 0,
    other_failures: bool = False,
    not_certified: str | None = None,
    model: str | None = None,
    patched: str | None = None,
) -> Conclusion:
    """The end of a run from its per-requirement summary and `--accept` values (the reporter's, and the docs' test
    renders the docs' quoted samples with it); `other_failures`: a failed test that names no known defect."""
    found = verdicts(summary, no_implementation=not_certified, model=model, patched=patched)
    result, taken = overall(found), accepted_defects(accept)
    known = KnownFailures(summary, taken, other_failures, not_certified, model)
    status = exit_status(result, pytest_status, set(accept), known)
    return Conclusion(found, result, known, status, run_headline(found, summary, taken, status, "partial" in accept))
