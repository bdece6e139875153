"""The figures of `make scale` (reports/scale/scale.json: one document per point of N kwok nodes) as evidence for the
enhancement review: GA-3 "scalability verified in clusters of 5000+ nodes" answered per release from the points
measured on it, and one line of figures per point beside the runs' figures.

Which figures the review cites: `dra-conformance review --scale FILE` (a fresh `make scale`), else the curve
committed with the docs (FIGURES_FILE, the one docs/performance.md quotes). A point's verdict:
- answered: a point of at least GA_NODES nodes completed both waves with no violation of the run-wide rules;
- partly answered: only smaller points completed, or kube-scheduler double-allocated (its known upstream defect,
  counted apart from the implementation's violations), or the largest point failed and a smaller one did not;
- failed: a completed point broke a run-wide rule (a device held twice, a pod bound before its conditions, ...).
Pure: the points' JSON in, cells and lines out (the report layer does not import the benchmark's package).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIGURES_FILE = REPO / "docs" / "figures" / "scale.json"
GA_NODES = 5000
ANSWERED, PARTLY, FAILED, NOT_ANSWERED = "answered", "partly answered", "failed", "not answered"


def load_points(paths: list[Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every point of every file (a scale.json list or one point-N.json); the files that were read."""
    points: list[dict[str, Any]] = []
    read = []
    for path in paths:
        doc = json.loads(path.read_text())
        points += doc if isinstance(doc, list) else [doc]
        read.append(str(path))
    return points, read


def _get(doc: Any, *path: str) -> Any:
    for step in path:
        doc = doc.get(step) if isinstance(doc, dict) else None
    return doc


def release_of(point: dict[str, Any]) -> str:
    return str(point.get("kubernetes") or "unknown").removeprefix("v")


def violations(point: dict[str, Any]) -> int:
    """Breaches of the run-wide rules by anything but kube-scheduler's known double allocation."""
    c = point.get("correctness") or {}
    return sum((c.get("violations") or {}).values()) + sum(
        r.get("violations", 0) for r in (c.get("fabricTruth") or {}).values()
    )


def completed(point: dict[str, Any]) -> bool:
    return not point.get("failed") and bool(point.get("correctness"))


def verdict(point: dict[str, Any]) -> tuple[str, str]:
    """(outcome, why) of one point: passed, failed (a rule broken, or the point did not complete)."""
    nodes = point.get("nodes")
    if point.get("failed"):
        return "failed", f"the {nodes}-node point did not complete: {str(point['failed'])[:300]}"
    if not completed(point):
        return "failed", f"the {nodes}-node point has no correctness figures"
    if found := violations(point):
        return "failed", f"{found} violations of the run-wide rules at {nodes} nodes"
    doubles = _get(point, "correctness", "schedulerDoubleAllocations") or 0
    return "passed", f"{doubles} double allocations by kube-scheduler" if doubles else ""


def answer(points: list[dict[str, Any]], release: str) -> tuple[str, dict[str, tuple[str, str]], str]:
    """GA-3 on `release`: (status, per point "make scale, N nodes" -> (outcome, reason), why)."""
    mine = sorted((p for p in points if release_of(p) == release), key=lambda p: int(p.get("nodes") or 0))
    if not mine:
        return NOT_ANSWERED, {}, f"no `make scale` figures of {release} were given to the review"
    cells = {f"make scale, {p.get('nodes')} nodes": verdict(p) for p in mine}
    if any(v[0] == "failed" and completed(p) for p, v in zip(mine, cells.values(), strict=True)):
        return FAILED, cells, ""
    large = [p for p in mine if completed(p) and int(p.get("nodes") or 0) >= GA_NODES]
    doubles = sum(_get(p, "correctness", "schedulerDoubleAllocations") or 0 for p in mine)
    if large and not doubles:
        return ANSWERED, cells, ""
    if doubles:
        return PARTLY, cells, f"kube-scheduler double-allocated {doubles} times (known upstream defect)"
    done = [int(p.get("nodes") or 0) for p in mine if completed(p)]
    why = f"the largest point that completed has {max(done)} nodes (GA: {GA_NODES}+)" if done else ""
    return (PARTLY if done else NOT_ANSWERED), cells, why or "no point completed"


def _n(v: Any) -> str:
    """A figure as the review shows it: 3 significant digits at most, a string (">16384") as it is."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return "-" if v is None else str(v)


def _q(doc: Any, *path: str, second: str = "p99") -> str:
    p50, other = _get(doc, *path, "p50"), _get(doc, *path, second)
    return "-" if p50 is None and other is None else f"p50 {_n(p50)}, {second} {_n(other)}"


def _binding_wait(wave: Any) -> Any:
    for per in (_get(wave, "scheduler", "bindingConditions") or {}).values():
        return next((per[k] for k in ("success", "Success", "all") if k in per), None)
    return None


def _scheduling(wave: Any) -> str:
    """The scheduler's own latency per pod: its algorithm (no PreBind wait in it) where the point has it, else the
    attempt (which includes the binding cycle)."""
    if _get(wave, "scheduler", "algorithmMs"):
        return f"scheduling algorithm ms {_q(wave, 'scheduler', 'algorithmMs', second='mean')}"
    return f"scheduling attempt ms {_q(wave, 'scheduler', 'schedulingAttemptMs', 'scheduled')}"


def line(point: dict[str, Any]) -> str:
    """One point's figures in a sentence: what it measured, on what, and under which load."""
    head = (
        f"make scale {point.get('nodes')} nodes, {point.get('pods')} pods per wave ({point.get('date')}, "
        f"{point.get('machine')}, one-minute load {point.get('load1mAtStart')}→{point.get('load1mAtEnd')})"
    )
    if point.get("failed"):
        return f"{head}: did not complete: {str(point['failed'])[:200]}"
    w, wo = _get(point, "waves", "withConditions"), _get(point, "waves", "withoutConditions")
    c = point.get("correctness") or {}
    rss = {n: _get(point, "processes", n, "peakRssMiB") for n in ("kube-apiserver", "etcd", "kube-scheduler", "suite")}
    return (
        f"{head}: bring-up {_n(_get(point, 'bringUp', 'seconds'))} s; without conditions "
        f"{_n(_get(wo, 'podsBoundPerSecond'))} pods bound/s, {_scheduling(wo)}; with conditions "
        f"{_n(_get(w, 'podsAllocatedPerSecond'))} pods into PreBind/s, {_get(w, 'peakWaiting')} waiting at once, "
        f"{_scheduling(w)}, binding-conditions wait s {_q(_binding_wait(w))} (held by the benchmark), condition "
        f"write to bound s {_q(w, 'conditionToBound')}, {_n(_get(w, 'boundPerSecondAfterRelease'))} pods bound/s "
        f"after the release; violations {violations(point)}, kube-scheduler double allocations "
        f"{c.get('schedulerDoubleAllocations', '-')}; peak RSS MiB " + ", ".join(f"{n} {v}" for n, v in rss.items())
    )


def lines(points: list[dict[str, Any]], release: str) -> list[str]:
    return [line(p) for p in sorted(points, key=lambda p: int(p.get("nodes") or 0)) if release_of(p) == release]
