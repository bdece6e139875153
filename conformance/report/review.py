"""The enhancement review's evidence from many runs: result bundles (releases, profiles, machines, CI shards) merged
into one document that answers each KEP-5007 question (kep_questions.py) per release, with the figures and the
known upstream defects per release. review_write.py writes it as a page (HTML, Markdown) and one JUnit.

Runs of one release merge per requirement: failed where any run failed it, passed where one passed and none failed,
else the most telling of the rest (skipped, not-covered, not-applicable) with its reason.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from conformance.cluster.defects import catalogue as known_defect_catalogue
from conformance.cluster.versions import UnsupportedVersion, parse_version
from conformance.report import scale_evidence
from conformance.report.bundle import BundleError, open_results
from conformance.report.catalogue import CATALOGUE, KEP_URL
from conformance.report.kep_questions import QUESTIONS, Question
from conformance.report.reasons import headline

KIND = {"apiVersion": "conformance.dra.example.com/v1alpha1", "kind": "EnhancementReview", "kep": KEP_URL}
# A question's answer on one release.
ANSWERED, PARTLY, FAILED, NOT_ANSWERED, NOT_RUN = "answered", "partly answered", "failed", "not answered", "not run"
# Every requirement that answers it is not applicable on the release (e.g. the gate cannot be switched off on 1.38).
NOT_APPLICABLE = "not applicable"
WHY_CHARS = 240  # of each requirement's reason in a `why`: the cause, the whole of it in the cell's runs
# Which outcome of several runs tells the most, where none failed and none passed.
_TELLING = ("partial", "skipped", "not-covered", "not-applicable")
# The run's figures the review shows (conformance-report.yaml `measurements`), in this order.
FIGURES = (
    ("conditions_to_bind_seconds", "SCH-4 condition write to bind"),
    ("attach_to_bind_seconds", "attach to bind"),
    ("ready_to_bind_seconds", "ready to bind (node-local)"),
    ("scale_pods_per_second_with_conditions", "SCALE-1 pods bound/s with conditions"),
    ("scale_pods_per_second_without_conditions", "SCALE-1 pods bound/s without"),
    ("scale_seconds_to_all_bound_with_conditions", "SCALE-1 s until all bound"),
)


@dataclass
class Run:
    """One suite run, read from its bundle (or reports folder)."""

    source: str
    report: dict[str, Any]

    @property
    def release(self) -> str:
        return str((self.report.get("cluster") or {}).get("kubernetes") or "unknown").removeprefix("v")

    @property
    def profile(self) -> str:
        return str((self.report.get("implementation") or {}).get("profile") or "?")

    @property
    def label(self) -> str:
        cluster = self.report.get("cluster") or {}
        where = Path(self.source)
        if lifecycle := self.report.get("lifecycle"):
            since = f" from {cluster['upgradedFrom']}" if cluster.get("upgradedFrom") else ""
            variant = f", variant {lifecycle['variant']}" if lifecycle.get("variant") else ""
            what = f"lifecycle {lifecycle.get('kind')}{since}{variant}"
        else:
            what = self.profile
        return f"{what} on {cluster.get('provider', '?')} ({where.parent.name}/{where.name})"

    def findings(self) -> list[dict[str, Any]]:
        """The KEP's sentences beside what a lifecycle run measured (conformance/lifecycle/ledger.py Finding)."""
        return [{**f, "run": self.label} for f in (self.report.get("lifecycle") or {}).get("findings") or []]

    def entry(self, requirement: str) -> dict[str, Any] | None:
        return (self.report.get("requirements") or {}).get(requirement)


def portable(source: str, base: Path | None = None) -> str:
    """A source named without this machine's folders, so that a review.yaml can be shared and committed (the docs
    site's copy): relative to `base` (the review's folder: its own runs), the working folder or the repository when
    it is in one of them, else its folder's and its own name, as a run's label says it."""
    path = Path(source)
    if not path.is_absolute():
        return source
    path = path.resolve()
    for root in (base, Path.cwd(), scale_evidence.REPO):
        if root is not None and path.is_relative_to(root.resolve()):
            return str(path.relative_to(root.resolve()))
    return f"{path.parent.name}/{path.name}"


def load_runs(sources: Iterable[Path]) -> list[Run]:
    """Every bundle's conformance report (checksums verified, as `dra-conformance report` does)."""
    runs = []
    for source in sources:
        folder, tmp = open_results(source)
        try:
            path = folder / "conformance-report.yaml"
            if not path.exists():
                raise BundleError(f"{source} has no conformance-report.yaml")
            runs.append(Run(str(source), yaml.safe_load(path.read_text())))
        finally:
            if tmp is not None:
                tmp.cleanup()
    return runs


def _order(version: str) -> tuple[int, ...]:
    try:
        v = parse_version(version)
    except UnsupportedVersion:
        return (999,)
    return (v.major, v.minor, v.patch, 0 if v.pre else 1)


@dataclass(frozen=True)
class Cell:
    """A requirement's merged outcome on one release."""

    outcome: str
    reason: str = ""
    runs: tuple[str, ...] = ()  # "<outcome>: <run label>" of every run that reported it
    known: tuple[str, ...] = ()  # known upstream defects its failures were

    @property
    def shown(self) -> str:
        return f"failed (known upstream defect: {', '.join(self.known)})" if self.known else self.outcome


def merge(entries: list[tuple[Run, dict[str, Any]]]) -> Cell:
    if not entries:
        return Cell("not-covered", "no run of this release reported it")
    runs = tuple(f"{e['outcome']}: {run.label}" for run, e in entries)
    by = {e["outcome"]: e for _run, e in reversed(entries)}
    if "failed" in by:
        known = tuple(sorted({k for _r, e in entries if e["outcome"] == "failed" for k in e.get("knownDefects") or []}))
        return Cell("failed", str(by["failed"].get("reason") or ""), runs, known)
    if "passed" in by:
        return Cell("passed", str(by["passed"].get("reason") or ""), runs)
    outcome = next((o for o in _TELLING if o in by), entries[0][1]["outcome"])
    return Cell(outcome, str(by[outcome].get("reason") or ""), runs)


@dataclass
class Answer:
    question: Question
    release: str
    status: str
    cells: dict[str, Cell] = field(default_factory=dict)
    note: str = ""  # why, where the answer is not the requirements' (GA-3 from `make scale`)
    findings: list[dict[str, Any]] = field(default_factory=list)  # the KEP's sentence beside what was measured

    @property
    def differs(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if not f.get("agrees")]

    @property
    def why(self) -> str:
        if self.status == NOT_ANSWERED and self.question.open:
            return f"not answered by any run yet: {self.question.open}"
        if self.note:
            return self.note
        if self.status == NOT_APPLICABLE:  # one reason usually stands for them all: said once
            by_reason: dict[str, list[str]] = {}
            for rid, c in self.cells.items():
                by_reason.setdefault(headline(c.reason, WHY_CHARS), []).append(rid)
            return "; ".join(f"{', '.join(rids)}: {reason}" for reason, rids in by_reason.items())
        # A skip without its reason cannot be acted on ("SCH-10 skipped": the release has no metrics? the run chose?).
        failing = [
            f"{rid} {c.shown}" + (f": {headline(c.reason, WHY_CHARS)}" if c.reason and c.outcome != "failed" else "")
            for rid, c in self.cells.items()
            if c.outcome not in ("passed", "not-applicable")
        ]
        return "; ".join(failing)


def scale_answer(question: Question, release: str, points: list[dict[str, Any]]) -> Answer:
    """A question answered by `make scale` (GA-3): one cell per point measured on the release."""
    status, cells, why = scale_evidence.answer(points, release)
    return Answer(question, release, status, {k: Cell(*v) for k, v in cells.items()}, why)


def answer(question: Question, release: str, runs: list[Run], not_run: str | None = None) -> Answer:
    if question.open or not question.answers:
        return Answer(question, release, NOT_ANSWERED)
    if not_run is not None or not runs:
        return Answer(question, release, NOT_RUN)
    cells = {rid: merge([(r, e) for r in runs if (e := r.entry(rid)) is not None]) for rid in question.answers}
    judged = [c for c in cells.values() if c.outcome != "not-applicable"]
    if any(c.outcome == "failed" for c in judged):
        status = FAILED
    elif judged and all(c.outcome == "passed" for c in judged):
        status = ANSWERED
    elif any(c.outcome == "passed" for c in judged):
        status = PARTLY
    elif cells and not judged:
        status = NOT_APPLICABLE
    else:
        status = NOT_ANSWERED
    return Answer(question, release, status, cells)


@dataclass
class Review:
    runs: list[Run]
    missing: dict[str, str] = field(default_factory=dict)  # release -> why it has no run
    scale: list[dict[str, Any]] = field(default_factory=list)  # points of `make scale` (scale_evidence.py)
    scale_sources: list[str] = field(default_factory=list)  # the files they were read from
    notes: list[str] = field(default_factory=list)  # lifecycle runs not run, and why
    date: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    @property
    def releases(self) -> list[str]:
        measured = {scale_evidence.release_of(p) for p in self.scale}
        return sorted({*(r.release for r in self.runs), *self.missing, *measured}, key=_order)

    def runs_of(self, release: str) -> list[Run]:
        return [r for r in self.runs if r.release == release]

    def answers(self) -> list[list[Answer]]:
        """Per question (catalogue order), its answer on every release, with the findings that bear on it (GA-3:
        from the `make scale` figures)."""
        rows = []
        for q in QUESTIONS:
            row = []
            for v in self.releases:
                if q.scale:
                    row.append(scale_answer(q, v, self.scale))
                    continue
                a = answer(q, v, self.runs_of(v), self.missing.get(v) if not self.runs_of(v) else None)
                a.findings = [f for f in self.findings(v) if f.get("question") == q.id]
                row.append(a)
            rows.append(row)
        return rows

    def findings(self, release: str) -> list[dict[str, Any]]:
        """Every KEP sentence a lifecycle run of the release measured, with what it measured."""
        return [f for run in self.runs_of(release) for f in run.findings()]

    def unanswered(self) -> list[Question]:
        return [q for q in QUESTIONS if (q.open or not q.answers) and not q.scale]

    def figures(self, release: str) -> list[str]:
        """The run's figures, one line each: the SLI and the record's latencies (SCH-10), then the measurements."""
        lines = scale_evidence.lines(self.scale, release)
        for run in self.runs_of(release):
            metrics = run.report.get("schedulerMetrics") or {}
            if sli := metrics.get("sli"):
                record = (metrics.get("record") or {}).get("conditions_to_bind") or {}
                lines.append(
                    f"{run.label}: PreBind wait SLI (success) p50 {sli.get('p50Seconds')} s, p99 "
                    f"{sli.get('p99Seconds')} s (n={sli.get('count')}); record condition-write-to-bind p50 "
                    f"{record.get('p50Seconds')} s, p99 {record.get('p99Seconds')} s"
                )
            elif metrics.get("notJudged"):
                lines.append(f"{run.label}: PreBind wait SLI not read: {metrics['notJudged']}")
            measured = run.report.get("measurements") or {}
            for key, label in FIGURES:
                if m := measured.get(key):
                    lines.append(f"{run.label}: {label} median {m['median']}, p95 {m['p95']} (n={m['count']})")
        return lines

    def defects(self, release: str) -> list[str]:
        """The known upstream defects listed for the release, and whether a run of it showed each."""
        seen = {d["id"] for r in self.runs_of(release) for d in r.report.get("knownDefects") or []}
        out = []
        for d in known_defect_catalogue().values():
            if not d.covers(release) and d.id not in seen:
                continue
            shown = "shown by a run here" if d.id in seen else "not shown by the runs here"
            measured = f"; measured on {', '.join(d.measured)}" if d.measured else ""
            what = d.requirement if d.fails else f"observed by {d.requirement}, fails no requirement"
            out.append(f"{d.id} ({what}): {shown}{measured}; {d.summary} [{d.writeup}]")
        return out

    def document(self, base: Path | None = None) -> dict[str, Any]:
        """The review as data (review.yaml); `base`: the folder it is written to, which its sources are named from."""
        return {
            **KIND,
            "date": self.date,
            "runs": [
                {
                    "source": portable(r.source, base),
                    "label": r.label,
                    "kubernetes": r.release,
                    "profile": r.profile,
                    "provider": (r.report.get("cluster") or {}).get("provider"),
                    "result": r.report.get("result"),
                    "date": r.report.get("date"),
                }
                for r in self.runs
            ],
            "notRun": self.missing,
            "scaleFigures": [portable(s, base) for s in self.scale_sources],
            **({"lifecycleNotRun": self.notes} if self.notes else {}),
            "questions": [
                {
                    "id": row[0].question.id,
                    "part": row[0].question.part,
                    "section": row[0].question.section,
                    "question": row[0].question.text,
                    "requirements": list(row[0].question.answers),
                    **({"note": row[0].question.note} if row[0].question.note else {}),
                    **({"notAnswered": row[0].question.open} if row[0].question.open else {}),
                    "releases": {
                        a.release: {
                            "answer": a.status,
                            **({"why": a.why} if a.why else {}),
                            "requirements": {rid: c.shown for rid, c in a.cells.items()},
                            **({"kepTextDiffers": [f["measured"] for f in a.differs]} if a.differs else {}),
                        }
                        for a in row
                    },
                }
                for row in self.answers()
            ],
            "findings": {v: self.findings(v) for v in self.releases},
            "figures": {v: self.figures(v) for v in self.releases},
            "knownDefects": {v: self.defects(v) for v in self.releases},
        }


def requirement_title(rid: str) -> str:
    req = CATALOGUE.get(rid)
    return f"{rid} ({req.level}) {req.title}" if req else rid
