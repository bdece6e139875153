"""What a lifecycle run checked, saw and found: every check with its requirement and step (the requirement's outcome
is the checks' together), what each kind of object did at each step (observations: recorded, not judged), and where
the KEP's text and the binaries agree or not (findings, each beside the KEP's own sentence)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from conformance.report.catalogue import CATALOGUE, LIFECYCLE_REQUIREMENTS

MAX_EVIDENCE = 30


@dataclass(frozen=True)
class Check:
    requirement: str
    step: str
    ok: bool
    what: str  # what was checked, and on a failure what was seen instead (its first line is the cause)

    def __str__(self) -> str:
        return f"{'ok' if self.ok else 'FAILED'} [{self.step}] {self.what}"


@dataclass(frozen=True)
class Observation:
    step: str
    subject: str  # the kind of object: bound pod, waiting pod, new pod, stored slice, new slice, claim write ...
    what: str


@dataclass(frozen=True)
class Finding:
    """One KEP sentence and what the binaries did; `agrees` False is a disagreement the review prints."""

    question: str  # the review question it answers (kep_questions.py), e.g. PRR-6
    kep: str  # the KEP's words
    measured: str
    agrees: bool


@dataclass
class Ledger:
    kind: str  # gates, upgrade
    checks: list[Check] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # each step: name, components, seconds
    stopped: str | None = None  # why the run ended before its last step
    not_applicable: str | None = None  # why this kind of run cannot be made on the release (nothing was started)
    logs: list[str] = field(default_factory=list)  # the components' logs kept beside the reports (relative paths)
    _started: float = field(default_factory=time.monotonic)

    def check(self, requirement: str, step: str, ok: bool, what: str) -> bool:
        assert requirement in CATALOGUE, requirement
        self.checks.append(Check(requirement, step, bool(ok), what))
        return bool(ok)

    def observe(self, step: str, subject: str, what: str) -> None:
        self.observations.append(Observation(step, subject, what))

    def find(self, question: str, kep: str, measured: str, agrees: bool) -> None:
        self.findings.append(Finding(question, kep, measured, agrees))

    def step(self, name: str, components: dict[str, str], seconds: float) -> None:
        self.steps.append({"step": name, "components": dict(components), "switchSeconds": round(seconds, 1)})

    @property
    def seconds(self) -> float:
        return time.monotonic() - self._started

    def judged(self) -> set[str]:
        """The requirements this kind of run judges (the others are not covered by it)."""
        return {c.requirement for c in self.checks} | set(KIND_REQUIREMENTS.get(self.kind, ()))

    def summary(self) -> dict[str, dict[str, Any]]:
        """Every lifecycle requirement with its outcome, in the shape of a suite run's conformance report: failed
        where a check failed (the first failed check is the reason), passed where every check passed, partial where
        the run stopped after some passed, not-judged where it stopped before any, not-covered where this kind of run
        does not judge it, not-applicable (every one it judges) where it cannot be made on the release."""
        out: dict[str, dict[str, Any]] = {}
        for req in LIFECYCLE_REQUIREMENTS:
            mine = [c for c in self.checks if c.requirement == req.id]
            failed = [c for c in mine if not c.ok]
            entry: dict[str, Any]
            if self.not_applicable and req.id in self.judged():
                entry = {"outcome": "not-applicable", "reason": self.not_applicable}
            elif failed:
                more = f" (and {len(failed) - 1} more failed checks)" if len(failed) > 1 else ""
                entry = {"outcome": "failed", "reason": f"{failed[0].step}: {failed[0].what}{more}"}
            elif mine and self.stopped:
                entry = {"outcome": "partial", "reason": f"the run stopped before its last step: {self.stopped}"}
            elif mine:
                entry = {"outcome": "passed", "reason": ""}
            elif req.id in self.judged() and self.stopped:
                entry = {"outcome": "not-judged", "reason": f"the run stopped before it was checked: {self.stopped}"}
            else:
                entry = {"outcome": "not-covered", "reason": f"not judged by a lifecycle {self.kind} run"}
            if mine:
                entry["checks"] = len(mine)
                shown = failed + [c for c in mine if c.ok]
                entry["evidence"] = [str(c) for c in shown[:MAX_EVIDENCE]]
            out[req.id] = {"level": req.level, "area": req.area, "title": req.title, **entry}
        return out

    def document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seconds": round(self.seconds, 1),
            **({"stopped": self.stopped} if self.stopped else {}),
            **({"notApplicable": self.not_applicable} if self.not_applicable else {}),
            "steps": self.steps,
            "findings": [asdict(f) for f in self.findings],
            "observations": [asdict(o) for o in self.observations],
            "checks": [asdict(c) for c in self.checks],
            **({"logs": self.logs} if self.logs else {}),
        }


# The requirements each kind of run is there to judge.
KIND_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "gates": ("GATE-1", "GATE-2", "GATE-3"),
    "upgrade": ("UPG-1", "UPG-2", "UPG-3", "SKEW-1"),
}
