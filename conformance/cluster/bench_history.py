"""Bench results kept side by side (reports/bench-history/), and what got slower since the previous one.

Each `make bench` (suite figures) and `make bench-cluster` (bring-up figures) adds one JSON file: the figures
flattened to name -> value, which way is better, the commit and the machine's load while it ran. The comparison
is with the newest earlier entry of the same kind; a figure counts as slower when it is worse by more than both a
relative and an absolute margin (run-to-run noise on a shared machine is large: the load is printed with it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOWER, HIGHER = "lower", "higher"  # which way is better
RELATIVE_MARGIN = 0.10
ABSOLUTE_MARGIN = {"s": 0.5, "MiB": 20.0, "pods/s": 0.2, "": 0.02}


@dataclass(frozen=True)
class Figure:
    value: float
    unit: str
    better: str = LOWER


def suite_figures(report: dict[str, Any]) -> dict[str, Figure]:
    """The figures of a suite run, from its conformance-report.yaml."""
    out: dict[str, Figure] = {}
    cluster = report.get("cluster", {})
    if "bringUpSeconds" in cluster:
        out["bring-up"] = Figure(cluster["bringUpSeconds"], "s")
    if "wallSeconds" in report:
        out["suite wall time"] = Figure(report["wallSeconds"], "s")
    for name, entry in report.get("scenarios", {}).items():
        if entry.get("outcome") == "passed":  # a failed or skipped scenario's time says nothing about speed
            out[f"scenario {name}"] = Figure(entry["seconds"], "s")
    measured = report.get("measurements", {})
    for key, label in (
        ("attach_to_bind_seconds", "attach-to-bind"),
        ("ready_to_bind_seconds", "ready-to-bind"),  # bindingModel node-local
        ("detach_seconds", "release-to-detached"),
    ):
        if key in measured:
            out[f"{label} median"] = Figure(measured[key]["median"], "s")
            out[f"{label} p95"] = Figure(measured[key]["p95"], "s")
    with_ = measured.get("scale_pods_per_second_with_conditions")
    without = measured.get("scale_pods_per_second_without_conditions")
    if with_:
        out["SCALE-1 pods/s with conditions"] = Figure(with_["median"], "pods/s", HIGHER)
    if without:
        out["SCALE-1 pods/s without conditions"] = Figure(without["median"], "pods/s", HIGHER)
    if with_ and without and without["median"]:
        out["SCALE-1 ratio with/without"] = Figure(with_["median"] / without["median"], "", HIGHER)
    if all_bound := measured.get("scale_seconds_to_all_bound_with_conditions"):
        out["SCALE-1 until all bound"] = Figure(all_bound["median"], "s")
    return out


def cluster_figures(bench: dict[str, Any]) -> dict[str, Figure]:
    """The figures of `dra-conformance bench` (medians of its runs)."""
    out = {"bring-up median": Figure(bench["bring_up_s"]["median"], "s")}
    out |= {f"phase {p.removesuffix('_s')}": Figure(v, "s") for p, v in bench.get("phases_median_s", {}).items()}
    out["teardown median"] = Figure(bench["teardown_s"]["median"], "s")
    if "total" in bench.get("cpu_s_median", {}):
        out["CPU seconds to Ready"] = Figure(bench["cpu_s_median"]["total"], "s")
    if "total" in bench.get("rss_mib_median", {}):
        out["control plane RSS"] = Figure(bench["rss_mib_median"]["total"], "MiB")
    return out


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def record(history: Path, kind: str, figures: dict[str, Figure]) -> Path:
    """Add an entry; return its file."""
    history.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    entry = {
        "kind": kind,
        "when": now.isoformat(timespec="seconds"),
        "commit": _commit(),
        "load_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "figures": {name: {"value": f.value, "unit": f.unit, "better": f.better} for name, f in figures.items()},
    }
    path = history / f"{now:%Y%m%dT%H%M%S%f}-{kind}.json"
    path.write_text(json.dumps(entry, indent=2) + "\n")
    return path


def previous(history: Path, kind: str, before: Path | None = None) -> dict[str, Any] | None:
    """The newest entry of `kind` (older than `before`, if given)."""
    entries = sorted(p for p in history.glob(f"*-{kind}.json") if before is None or p.name < before.name)
    return json.loads(entries[-1].read_text()) if entries else None


def slower(old: dict[str, Any], new: dict[str, Figure]) -> list[str]:
    """One line per figure worse than before by more than the margins, worst first."""
    found = []
    for name, fig in new.items():
        before = old["figures"].get(name)
        if before is None or not before["value"]:
            continue
        worse = fig.value - before["value"] if fig.better == LOWER else before["value"] - fig.value
        relative = worse / abs(before["value"])
        if relative > RELATIVE_MARGIN and worse > ABSOLUTE_MARGIN.get(fig.unit, 0.0):
            unit = f" {fig.unit}" if fig.unit else ""
            found.append(
                (relative, f"  {name}: {before['value']:.2f}{unit} -> {fig.value:.2f}{unit} ({relative:+.0%} worse)")
            )
    return [line for _, line in sorted(found, reverse=True)]


def compare_and_record(history: Path, kind: str, figures: dict[str, Figure]) -> list[str]:
    """Compare with the previous entry of `kind`, record this one; return the lines to print."""
    old = previous(history, kind)
    path = record(history, kind, figures)
    if old is None:
        return [f"first {kind} bench kept in {history} ({path.name}): nothing to compare with yet"]
    load_now = os.getloadavg()[0]
    header = (
        f"compared with the previous {kind} bench ({old['when']}, commit {old['commit']}, "
        f"load {old['load_1m']:.1f}; now load {load_now:.1f} on {os.cpu_count()} CPUs):"
    )
    lines = slower(old, figures)
    if not lines:
        return [header, f"  nothing got slower (by more than {RELATIVE_MARGIN:.0%} and its absolute margin)"]
    return [header, "slower:", *lines]
