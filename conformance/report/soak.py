"""Summary of a soak (`make soak N=20`): N consecutive full runs of every reference profile, each in its own folder
`<soak>/<run>/<profile>/` with the suite's junit.xml and conformance-report.yaml, and the exit status of its `make
conformance` in `exit-status` (written by `make soak`).

Prints per test how often it failed (of how many runs it ran in), then the spread (min, median, max) of every figure
the runs' reports carry: wall time, bring-up, phases, each scenario's seconds, each measurement's median. Figures,
not verdicts: the exit status says only whether any run failed (a failed test, or a non-zero exit status with no
failed test: a leftover, a verdict the run did not accept, no test run) or is missing its reports.
"""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXIT_STATUS = "exit-status"  # the file in each run folder that holds the run's exit status
KNOWN_DEFECT = "known_defect"  # the JUnit property of a failure on a known upstream defect (cluster/defects.py)


@dataclass
class Soak:
    runs: list[Path] = field(default_factory=list)  # one folder per (run, profile)
    missing: list[Path] = field(default_factory=list)  # a run that left no report (crashed, interrupted)
    exits: dict[str, int] = field(default_factory=dict)  # run label -> its non-zero exit status
    ran: dict[str, int] = field(default_factory=dict)  # test -> runs it ran in (passed, failed or skipped)
    failed: dict[str, list[str]] = field(default_factory=dict)  # test -> the runs it failed in
    # test -> the runs it failed in on a known upstream defect of the release that the run accepted (exit 0)
    known: dict[str, list[str]] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=dict)  # the reports' `result` (success, partial, failure) -> runs
    figures: dict[str, list[float]] = field(default_factory=dict)  # "profile: figure" -> one value per run
    per_profile: dict[str, list[int]] = field(default_factory=dict)  # profile -> [runs, runs that exited 0]


def _cases(junit: Path) -> dict[str, str]:
    """Outcome of each test case of pytest's JUnit XML: passed, failure, error, skipped, or known (a failure the
    suite attributed to a known upstream defect of the cluster's release: property known_defect)."""
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
        outcomes[name] = kinds[0] if kinds else "passed"
        if outcomes[name] == "failure" and any(
            p.get("name") == KNOWN_DEFECT and p.get("value") for p in case.iter("property")
        ):
            outcomes[name] = "known"
    return outcomes


def _report_figures(report: dict[str, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    if isinstance(report.get("wallSeconds"), int | float):
        found["wall s"] = float(report["wallSeconds"])
    if isinstance(up := report.get("cluster", {}).get("bringUpSeconds"), int | float):
        found["bring-up s"] = float(up)
    for phase, seconds in (report.get("phases") or {}).items():
        found[f"phase {phase} s"] = float(seconds)
    for name, entry in (report.get("scenarios") or {}).items():
        found[f"scenario {name} s"] = float(entry["seconds"])
    for key, m in (report.get("measurements") or {}).items():
        found[f"{key} (median)"] = float(m["median"])
    if isinstance(gather := (report.get("artefacts") or {}).get("gatherSeconds"), int | float):
        found["gather s"] = float(gather)
    return found


def _exit_status(path: Path) -> int | None:
    """The run's exit status as `make soak` wrote it; None where there is none (a folder from before it was kept)."""
    if not path.exists():
        return None
    text = path.read_text().strip()
    return int(text) if text.lstrip("-").isdigit() else -1  # unreadable: counted as failed, never as passed


def collect(*roots: Path) -> Soak:
    """Every run folder under each root that a soak made (a folder holding junit.xml or conformance-report.yaml, or
    the empty folder of a run that left nothing). Several roots are the shards of one soak (`make soak` side by side,
    each with its own REPORTS): a run is then named by its shard's folder too."""
    soak = Soak()
    for root in roots:
        _collect(soak, root, f"{root.name}:" if len(roots) > 1 else "")
    return soak


def _collect(soak: Soak, root: Path, shard: str) -> None:
    for run in sorted(p for p in root.glob("*/*") if p.is_dir()):
        junit, report = run / "junit.xml", run / "conformance-report.yaml"
        if not junit.exists() or not report.exists():
            soak.missing.append(run)
        soak.runs.append(run)
        label = shard + run.relative_to(root).as_posix()
        profile = run.name
        counts = soak.per_profile.setdefault(profile, [0, 0])
        counts[0] += 1
        if (status := _exit_status(run / EXIT_STATUS)) not in (None, 0):
            soak.exits[label] = status
        else:
            counts[1] += report.exists()
        if junit.exists():
            for test, outcome in _cases(junit).items():
                key = f"{profile}: {test}"
                soak.ran[key] = soak.ran.get(key, 0) + 1
                if outcome in ("failure", "error"):
                    soak.failed.setdefault(key, []).append(label)
                elif outcome == "known":
                    soak.known.setdefault(key, []).append(label)
        if report.exists():
            doc = yaml.safe_load(report.read_text()) or {}
            verdict = str(doc.get("result") or "none")
            soak.verdicts[verdict] = soak.verdicts.get(verdict, 0) + 1
            for name, value in _report_figures(doc).items():
                soak.figures.setdefault(f"{profile}: {name}", []).append(value)


def lines(soak: Soak) -> list[str]:
    out = [f"soak: {len(soak.runs)} runs ({len({r.parent for r in soak.runs})} rounds x profiles)"]
    for profile, (runs, clean) in sorted(soak.per_profile.items()):
        out.append(f"  {profile}: {runs} runs, {clean} exited 0 with their reports")
    for run in soak.missing:
        out.append(f"  NO REPORT: {run} (the run crashed or was stopped before writing junit.xml and its report)")
    for label, status in sorted(soak.exits.items()):
        out.append(f"  EXIT {status}: {label} (see its junit.xml and the verdict in its conformance-report.yaml)")
    verdicts = ", ".join(f"{name} {n}" for name, n in sorted(soak.verdicts.items()))
    out.append(f"results in the reports: {verdicts or 'none'} (a known upstream defect keeps `failure` there)")
    out.append(f"runs that exited non-zero: {len(soak.exits)} (partial {sum(s == 6 for s in soak.exits.values())})")
    out.append("failures per test (failed/ran, the runs it failed in):")
    if not soak.failed:
        out.append(f"  none: {len(soak.ran)} tests, each passed or skipped in every run (known defects aside)")
    for test, runs in sorted(soak.failed.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"  {len(runs)}/{soak.ran[test]}  {test}  [{', '.join(runs)}]")
    if soak.known:
        out.append("failures on known upstream defects of the release (not counted as the soak's failures):")
    for test, runs in sorted(soak.known.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"  {len(runs)}/{soak.ran[test]}  {test}")
    out.append("figures (min / median / max over the runs, n):")
    width = max((len(k) for k in soak.figures), default=0)
    for name, values in sorted(soak.figures.items()):
        spread = f"{min(values):8.2f} {statistics.median(values):8.2f} {max(values):8.2f}"
        out.append(f"  {name:<{width}}  {spread}  n={len(values)}")
    return out


def report(*roots: Path) -> int:
    """Print the soak's summary; 0 when every run wrote its reports and no test failed."""
    soak = collect(*roots)
    for line in lines(soak):
        print(line)
    return 1 if soak.failed or soak.missing or soak.exits or not soak.runs else 0
