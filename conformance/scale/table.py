"""The figures of `make scale` as one table: a row per figure, a column per point (100 / 1000 / 5000 nodes), printed
as text or as Markdown for docs/performance.md. Pure: the points' JSON documents in, lines out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Point = dict[str, Any]
MISSING = "-"


def dig(doc: Any, *path: str | int) -> Any:
    """doc[path[0]][path[1]]...; None where any step is missing."""
    for step in path:
        if isinstance(doc, dict):
            doc = doc.get(step)
        elif isinstance(doc, list) and isinstance(step, int) and -len(doc) <= step < len(doc):
            doc = doc[step]
        else:
            return None
    return doc


def _num(v: Any, digits: int = 1) -> str:
    if v is None:
        return MISSING
    if isinstance(v, str):  # a quantile above a histogram's top bucket: ">0.2048"
        return v
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        return f"{round(v):d}"
    return f"{v:.{digits}f}"


def _pair(a: Any, b: Any, digits: int = 1) -> str:
    return MISSING if a is None and b is None else f"{_num(a, digits)} / {_num(b, digits)}"


def _family(point: Point, wave: str) -> dict[str, Any]:
    """The one binding-conditions histogram of a wave's scheduler figures (the name the scheduler serves)."""
    found = dig(point, "waves", wave, "scheduler", "bindingConditions") or {}
    for per in found.values():
        return next((per[k] for k in ("success", "Success", "all") if k in per), next(iter(per.values()), {}))
    return {}


def _ratio(point: Point) -> Any:
    """Pods through scheduling into PreBind per second with conditions, over pods bound per second without."""
    w = dig(point, "waves", "withConditions", "podsAllocatedPerSecond")
    wo = dig(point, "waves", "withoutConditions", "podsBoundPerSecond")
    return round(w / wo, 2) if w and wo else None


def _status_writes(point: Point, wave: str) -> str:
    writes = dig(point, "waves", wave, "resourceclaimsStatusWrites") or {}
    return ", ".join(f"{verb} {_pair(s.get('p50'), s.get('p99'))}" for verb, s in writes.items()) or MISSING


def _violations(point: Point) -> str:
    c = point.get("correctness")
    if not c:
        return MISSING
    found = sum(c.get("violations", {}).values()) + sum(r["violations"] for r in c.get("fabricTruth", {}).values())
    return f"{found} / {c.get('schedulerDoubleAllocations', 0)}"


def _peak(point: Point, name: str) -> Any:
    return dig(point, "processes", name, "peakRssMiB")


W, WO = "withConditions", "withoutConditions"


def _quantiles(wave: str, *path: str, digits: int = 1) -> Callable[[Point], str]:
    """p50 / p99 of a summary in a wave's figures."""
    return lambda p: _pair(*(dig(p, "waves", wave, *path, q) for q in ("p50", "p99")), digits)


def _p50_mean(wave: str, *path: str, digits: int = 3) -> Callable[[Point], str]:
    """p50 / mean: kube-scheduler's extension-point histogram ends at 0.2048 s, so its p99 of a PreBind that waits
    is only ">0.2048"; the mean (its sum over its count) is exact."""
    return lambda p: _pair(*(dig(p, "waves", wave, *path, q) for q in ("p50", "mean")), digits)


def _wave(wave: str, *path: str, digits: int = 1) -> Callable[[Point], str]:
    return lambda p: _num(dig(p, "waves", wave, *path), digits)


ROWS: list[tuple[str, Callable[[Point], str]]] = [
    ("pods per wave", lambda p: _num(p.get("pods"))),
    ("load (1 min) at start / end", lambda p: _pair(p.get("load1mAtStart"), p.get("load1mAtEnd"))),
    ("bring-up to all nodes Ready (s)", lambda p: _num(dig(p, "bringUp", "seconds"))),
    ("  nodes created per second", lambda p: _num(dig(p, "bringUp", "nodesPerSecond"))),
    ("  Ready after the last creation (s)", lambda p: _num(dig(p, "bringUp", "readyAfterCreateSeconds"))),
    ("slices: node-local / fabric", lambda p: _pair(dig(p, "slices", "nodeLocal"), dig(p, "slices", "fabricSlices"))),
    ("without conditions: pods bound per s", _wave(WO, "podsBoundPerSecond")),
    ("  scheduling attempt p50 / p99 (ms)", _quantiles(WO, "scheduler", "schedulingAttemptMs", "scheduled")),
    ("  scheduling algorithm p50 / mean (ms)", _p50_mean(WO, "scheduler", "algorithmMs", digits=1)),
    ("  Filter p50 / mean (ms)", _p50_mean(WO, "scheduler", "extensionPointMs", "Filter", digits=1)),
    ("  PreBind p50 / mean (s)", _p50_mean(WO, "scheduler", "preBindSeconds", "Success")),
    ("  claims status writes p50 / p99 (ms)", lambda p: _status_writes(p, WO)),
    ("with conditions: pods into PreBind per s", _wave(W, "podsAllocatedPerSecond")),
    ("  most pods waiting in PreBind at once", _wave(W, "peakWaiting")),
    ("  scheduling attempt p50 / p99 (ms)", _quantiles(W, "scheduler", "schedulingAttemptMs", "scheduled")),
    ("  scheduling algorithm p50 / mean (ms)", _p50_mean(W, "scheduler", "algorithmMs", digits=1)),
    ("  Filter p50 / mean (ms)", _p50_mean(W, "scheduler", "extensionPointMs", "Filter", digits=1)),
    ("  binding-conditions wait p50 / p99 (s)", lambda p: _pair(_family(p, W).get("p50"), _family(p, W).get("p99"))),
    ("  PreBind p50 / mean (s)", _p50_mean(W, "scheduler", "preBindSeconds", "Success")),
    ("  release to all bound (s)", _wave(W, "releaseToAllBound")),
    ("  pods bound per s after the release", _wave(W, "boundPerSecondAfterRelease")),
    ("  condition write to bound p50 / p99 (s)", _quantiles(W, "conditionToBound", digits=2)),
    ("  last condition to last bound (s)", _wave(W, "conditionToBound", "lastConditionToLastBound", digits=2)),
    ("  claims status writes p50 / p99 (ms)", lambda p: _status_writes(p, W)),
    ("ratio into PreBind with / bound without", lambda p: _num(_ratio(p), 2)),
    ("violations / scheduler double allocations", _violations),
    (
        "peak RSS MiB: apiserver / etcd / scheduler",
        lambda p: " / ".join(_num(_peak(p, n), 0) for n in ("kube-apiserver", "etcd", "kube-scheduler")),
    ),
    ("suite: peak RSS MiB / CPU s", lambda p: _pair(_peak(p, "suite"), dig(p, "processes", "suite", "cpuSeconds"), 0)),
    ("record: changes kept / probe samples", lambda p: _pair(_records(p), dig(p, "record", "probe", "samples"), 0)),
    ("point wall time (s)", lambda p: _num(p.get("wallSeconds"))),
]


def _records(point: Point) -> Any:
    counts = dig(point, "record", "records")
    return sum(counts.values()) if counts else None


def rows(points: list[Point]) -> list[list[str]]:
    """Header (nodes per point) then one row per figure; a failed point says so in its column."""
    header = ["figure", *(f"{p.get('nodes')} nodes" for p in points)]
    out = [header]
    for label, read in ROWS:
        out.append([label, *(read(p) for p in points)])
    if any(p.get("failed") for p in points):
        out.append(["failed", *((p.get("failed") or "")[:60] for p in points)])
    return out


def text(points: list[Point]) -> list[str]:
    table = rows(points)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return [
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(r)) for r in table
    ]


def markdown(points: list[Point]) -> list[str]:
    table = rows(points)
    lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    return lines + ["| " + " | ".join(cell.strip() for cell in r) + " |" for r in table[1:]]


def peak_memory_mib(point: Point) -> float | None:
    """The point's peak memory, bounded from above: every process's own peak RSS (control plane, implementation,
    the suite) added up (they need not peak at once)."""
    processes = point.get("processes") or {}
    peaks = [p.get("peakRssMiB") or 0 for p in processes.values()]
    return sum(peaks) if peaks else None


def closing(points: list[Point], seconds: float) -> str:
    """`make scale`'s closing note: wall time, and per point its peak memory and the least the machine had left."""
    parts = []
    for p in points:
        peak = peak_memory_mib(p)
        largest = sorted((p.get("processes") or {}).items(), key=lambda kv: -(kv[1].get("peakRssMiB") or 0))[:3]
        biggest = ", ".join(f"{name} {v.get('peakRssMiB')}" for name, v in largest)
        least = p.get("leastAvailableGiB")
        parts.append(
            f"{p.get('nodes')} nodes: {_num(p.get('wallSeconds'))} s, peak memory <= {_num(peak, 0)} MiB "
            f"({biggest}{'; ' if biggest else ''}machine's least available {_num(least)} GiB)"
            + (" FAILED" if p.get("failed") else "")
        )
    return f"wall time {seconds:.0f} s; " + "; ".join(parts)
