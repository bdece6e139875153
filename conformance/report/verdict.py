"""The two verdicts of a run (cluster, implementation), their reasons, and the exit status that tells them.

The cluster (kube-apiserver, kube-scheduler of one release) is certified by BASE-*, API-* and SCH-*; the
implementation by IMP-* and SCALE-1 (design.md, "Two things are certified, separately"). Each verdict is
`failure` (a requirement failed), `partial` (a MUST was not shown to pass: skipped, not judged, only partly run, not
covered) or `success`; a run without a profile does not certify an implementation at all (`not-certified`). A
requirement that does not apply to the profile's binding model (`not-applicable`, e.g. a fabric-only one for
bindingModel node-local) is counted out: it never makes a verdict partial or failed, and the verdict says how many it
left out.

pytest's exit status says the verdict, so CI cannot read a partial run as a pass: 0 success, 1 failure,
EXIT_PARTIAL for partial unless the run was started with `--accept partial` (a profile that knowingly lacks a
capability, or a run of a subset of the suite).

A requirement that failed only with the symptom of a known upstream defect of the cluster's release
(cluster/known-defects.yaml) stays failed and its verdict failure; it reads `failed (known upstream defect: ID)`, and
the exit status is EXIT_KNOWN_DEFECT, unless every such defect was accepted with `--accept known-defect:ID`: then
the run exits as if those requirements were not part of it (0, or EXIT_PARTIAL for what else is missing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.report.catalogue import CATALOGUE
from conformance.report.reasons import headline

EXIT_FAILURE = 1
EXIT_PARTIAL = 6  # pytest uses 0-5; 6 is free
EXIT_KNOWN_DEFECT = 7  # every failure is a known upstream defect, and not all of those were accepted
CLUSTER_AREAS = ("baseline", "api", "scheduler")
IMPLEMENTATION_AREAS = ("implementation", "scale")
NOT_CERTIFIED = "not-certified"
NOT_APPLICABLE = "not-applicable"  # a requirement's outcome where it does not apply to the profile's binding model
# A requirement's outcome where its scenario failed before its evidence existed (suite/judged.py): not shown to pass.
NOT_JUDGED = "not-judged"


@dataclass
class Verdict:
    """One verdict and why: every requirement that was not shown to pass, worst first."""

    subject: str  # "cluster" or "implementation"
    result: str  # success, partial, failure, not-certified
    reasons: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    not_applicable: list[str] = field(default_factory=list)  # requirements counted out for the binding model
    model: str | None = None  # the profile's binding model
    # The cluster verdict of a control plane built from patches or a checkout: what it was built from
    # (toolchain.source.KubeSource.describe()); None for a release as published.
    patched: str | None = None

    @property
    def shown(self) -> str:
        """The result as the reports print it: with the requirements it counted out, e.g. `success (12 requirements
        not applicable to bindingModel node-local)`, and on a patched control plane `success (patched control plane:
        v1.37.2 patched: 0001-fix.patch (sha256 ...))`."""
        notes = [f"patched control plane: {self.patched}"] if self.patched else []
        if self.not_applicable and self.result != NOT_CERTIFIED:
            n = len(self.not_applicable)
            notes.append(f"{n} requirement{'s' if n != 1 else ''} not applicable to bindingModel {self.model}")
        return f"{self.result} ({'; '.join(notes)})" if notes else self.result

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"result": self.result, "reasons": self.reasons, "counts": self.counts}
        if self.patched:
            out["summary"], out["patched"] = self.shown, self.patched
        if self.not_applicable and self.result != NOT_CERTIFIED:
            out["summary"] = self.shown
            out["notApplicable"] = {"bindingModel": self.model, "requirements": self.not_applicable}
        return out


def shown_outcome(entry: dict[str, Any]) -> str:
    """The outcome as every report prints it: `failed (known upstream defect: ID)` where a known defect explains the
    failure (the outcome itself stays `failed`)."""
    known = entry.get("knownDefects")
    if entry["outcome"] == "failed" and known:
        return f"failed (known upstream defect: {', '.join(known)})"
    return str(entry["outcome"])


def known_defects(summary: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Known defect id -> the failed requirements it explains."""
    found: dict[str, list[str]] = {}
    for rid, e in summary.items():
        if e["outcome"] == "failed":
            for kid in e.get("knownDefects") or []:
                found.setdefault(kid, []).append(rid)
    return found


def subject_of(requirement: str) -> str:
    return "cluster" if CATALOGUE[requirement].area in CLUSTER_AREAS else "implementation"


def judge(
    summary: dict[str, dict[str, Any]], subject: str, *, not_certified: str | None = None, model: str | None = None
) -> Verdict:
    """The verdict of `subject` from the per-requirement summary; `not_certified` gives the reason a run certifies
    no implementation (then its IMP-* outcomes are listed as not checked, and the result is not-certified); `model`:
    the profile's binding model, which the requirements not applicable to it are counted out for."""
    entries = {rid: e for rid, e in summary.items() if subject_of(rid) == subject}
    counts: dict[str, int] = {}
    for e in entries.values():
        counts[e["outcome"]] = counts.get(e["outcome"], 0) + 1
    if not_certified is not None:
        return Verdict(subject, NOT_CERTIFIED, [f"the implementation was not certified: {not_certified}"], counts)
    apart = [rid for rid, e in entries.items() if e["outcome"] == NOT_APPLICABLE]
    judged = {rid: e for rid, e in entries.items() if rid not in apart}
    failed = [rid for rid, e in judged.items() if e["outcome"] == "failed"]
    missing = [rid for rid, e in judged.items() if e["level"] == "MUST" and e["outcome"] != "passed"]
    optional = [rid for rid, e in judged.items() if e["level"] != "MUST" and e["outcome"] not in ("passed", "failed")]
    reasons = [f"{rid} {e['level']} {shown_outcome(e)}: {_headline(e)}" for rid in failed for e in (judged[rid],)]
    reasons += _grouped(judged, [rid for rid in missing if rid not in failed], "")
    reasons += _grouped(judged, optional, " (does not change the verdict)")
    reasons += [
        f"{', '.join(rids)} not applicable (counted out of the verdict): {why}"
        for why, rids in _by_reason(entries, apart).items()
    ]
    result = "failure" if failed else "partial" if missing else "success"
    return Verdict(subject, result, reasons, counts, apart, model)


def _by_reason(entries: dict[str, dict[str, Any]], ids: list[str]) -> dict[str, list[str]]:
    """Not-applicable requirements grouped by why, without each one's own detail in brackets (one line for all the
    fabric-only ones; the requirements list each one's detail)."""
    out: dict[str, list[str]] = {}
    for rid in ids:
        out.setdefault(_headline(entries[rid]).split(" (", 1)[0], []).append(rid)
    return out


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


def verdicts(
    summary: dict[str, dict[str, Any]],
    *,
    no_implementation: str | None = None,
    model: str | None = None,
    patched: str | None = None,
) -> dict[str, Verdict]:
    """Both verdicts; `patched`: what a patched control plane was built from (the cluster verdict says so first)."""
    cluster = judge(summary, "cluster", model=model)
    cluster.patched = patched
    return {
        "cluster": cluster,
        "implementation": judge(summary, "implementation", not_certified=no_implementation, model=model),
    }


def overall(found: dict[str, Verdict]) -> str:
    """The run's result: the worst verdict among those certified."""
    results = [v.result for v in found.values() if v.result != NOT_CERTIFIED]
    for worst in ("failure", "partial"):
        if worst in results:
            return worst
    return "success"


@dataclass(frozen=True)
class KnownFailures:
    """What the exit status needs to know about failures explained by known upstream defects."""

    summary: dict[str, dict[str, Any]]
    accepted: set[str]  # known defect ids named by --accept known-defect:ID
    other_failed_tests: bool = False  # a failed test that names no known defect (any test, with a requirement or not)
    no_implementation: str | None = None
    model: str | None = None  # the profile's binding model

    def only_known(self) -> bool:
        """Every failed requirement is explained by known defects, and no other test failed."""
        failed = [e for e in self.summary.values() if e["outcome"] == "failed"]
        return bool(failed) and all(e.get("knownDefects") for e in failed) and not self.other_failed_tests

    def unaccepted(self) -> set[str]:
        return set(known_defects(self.summary)) - self.accepted

    def rest(self) -> str:
        """The run's result with the requirements failed by accepted known defects left out (not passed: absent)."""
        rest = {rid: e for rid, e in self.summary.items() if not (e["outcome"] == "failed" and e.get("knownDefects"))}
        return overall(verdicts(rest, no_implementation=self.no_implementation, model=self.model))


def exit_status(result: str, pytest_status: int, accept: set[str], known: KnownFailures | None = None) -> int:
    """The exit status for a run's result: pytest's own non-zero status wins (interrupted, usage, internal);
    a failure is 1 even if pytest saw none (a requirement failed in a report phase), EXIT_KNOWN_DEFECT when every
    failure is a known upstream defect, and 0-or-partial for the rest when every one of those was accepted; partial
    is EXIT_PARTIAL unless accepted."""
    if pytest_status not in (0, EXIT_FAILURE):
        return pytest_status
    if result == "failure":
        if known is None or not known.only_known():
            return EXIT_FAILURE
        if known.unaccepted():
            return EXIT_KNOWN_DEFECT
        result, pytest_status = known.rest(), 0  # the failed tests are exactly the accepted known defects
    if pytest_status:
        return pytest_status
    if result == "partial" and "partial" not in accept:
        return EXIT_PARTIAL
    return 0
