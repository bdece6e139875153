"""The release matrix: every catalogue requirement by every Kubernetes release, outcome and reason in each cell.

Built from the conformance-report.yaml of one suite run per release (conformance.matrix runs them); written as
YAML (for tools), Markdown (for the review) and HTML (the same table, self-contained). A release whose run left no
report shows "error" in every cell, with what the run said, so it cannot pass for a clean column.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from conformance.cluster.versions import Release, parse_version
from conformance.report.catalogue import KEP_URL, SUITE_REQUIREMENTS
from conformance.report.verdict import EXIT_PARTIAL

RUN_RECORD = "run.json"
SYMBOL = {
    "passed": "✅",
    "partial": "◐",
    "failed": "❌",
    "skipped": "⏭",
    "not-judged": "⊘",
    "not-covered": "—",
    "not-applicable": "∅",
    "error": "💥",
}


@dataclass
class ReleaseRun:
    """One suite run on one release: its report (None if the run left none) and how the run went."""

    version: str
    report: dict[str, Any] | None
    exit_code: int | None = None
    run_seconds: float | None = None
    build_seconds: float | None = None
    note: str = ""  # why there is no report (the run's last words)
    reports_dir: str = ""
    tests: str = ""  # pytest's summary line, e.g. "57 passed, 5 skipped"
    skipped_tests: dict[str, str] = field(default_factory=dict)  # test node id -> skip reason (from junit.xml)

    @property
    def release(self) -> Release:
        return parse_version(self.version).release

    def cell(self, requirement: str) -> dict[str, str]:
        if self.report is None:
            return {"outcome": "error", "reason": self.note or "the run wrote no conformance report"}
        entry = self.report.get("requirements", {}).get(requirement)
        if entry is None:
            return {"outcome": "not-covered", "reason": "the run's report does not list this requirement"}
        cell = {"outcome": entry["outcome"], "reason": entry.get("reason") or ""}
        if entry["outcome"] == "failed" and (known := entry.get("knownDefects")):  # still failed; say which defect
            cell["reason"] = f"known upstream defect: {', '.join(known)}; {cell['reason']}"
        skipped = [self.skipped_tests[t] for t in entry.get("tests", []) if t in self.skipped_tests]
        if entry["outcome"] == "passed" and skipped:  # passed on some tests: say what was not checked, and why
            cell["reason"] = f"{len(skipped)} of {len(entry['tests'])} tests skipped: {skipped[0]}"
        if entry["outcome"] == "passed" and (adapted := adaptations(self.release).get(requirement)):
            cell["reason"] = "; ".join(filter(None, [cell["reason"], adapted]))
        return cell

    @property
    def result(self) -> str:
        return self.report["result"] if self.report else "error"


def adaptations(release: Release) -> dict[str, str]:
    """What a passing requirement did not assert on this release, because the release does not do it (versions.py)."""
    out = {}
    if not release.nominates_while_waiting:
        out["SCH-3"] = (
            f"nominatedNodeName while waiting not asserted: NominatedNodeNameForExpectation is alpha and off in "
            f"{release.name}"
        )
    return out


def load_run(version: str, reports_dir: Path, **run: Any) -> ReleaseRun:
    """The run of `version` whose reports are in `reports_dir` (conformance-report.yaml)."""
    path = reports_dir / "conformance-report.yaml"
    report = yaml.safe_load(path.read_text()) if path.exists() else None
    recorded = reports_dir / RUN_RECORD  # what the runner wrote: lets --report-only show the run's time
    run = {**(json.loads(recorded.read_text()) if recorded.exists() else {}), **run}
    return ReleaseRun(
        version,
        report,
        reports_dir=str(reports_dir),
        tests=_pytest_summary(reports_dir),
        skipped_tests=_skipped_tests(reports_dir / "junit.xml"),
        **run,
    )


def _skipped_tests(junit: Path) -> dict[str, str]:
    """Node id -> reason of every skipped test case in a pytest JUnit file (classname a.b.c, name -> a/b/c.py::name)."""
    if not junit.exists():
        return {}
    skipped = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if (skip := case.find("skipped")) is not None:
            nodeid = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            skipped[nodeid] = skip.get("message") or ""
    return skipped


_SUMMARY_RE = re.compile(r"^=* ?(\d+ (?:passed|failed|skipped|error).*?) in [\d.]+s")


def _pytest_summary(reports_dir: Path) -> str:
    """The counts of pytest's last line in the run's pytest.log ("" if there is none)."""
    log = reports_dir / "pytest.log"
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for line in reversed(lines):
        if match := _SUMMARY_RE.match(line.strip()):
            return match[1]
    return ""


@dataclass
class Matrix:
    runs: list[ReleaseRun]
    profile: str = ""
    date: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def unexplained(self) -> list[str]:
        """Cells that a review could not accept: a skip without a reason (every skip must say why)."""
        return [
            f"{req.id} on {run.version}"
            for run in self.runs
            for req in SUITE_REQUIREMENTS
            if run.cell(req.id)["outcome"] == "skipped" and not run.cell(req.id)["reason"]
        ]

    @property
    def result(self) -> str:
        """failure if any release failed or left no report; partial if any is partial or a skip is unexplained."""
        results = {run.result for run in self.runs}
        if results & {"failure", "error"}:
            return "failure"
        if "partial" in results or self.unexplained():
            return "partial"
        return "success"

    def failing(self) -> list[str]:
        """Releases that fail the matrix's exit status: a run that left no report, or failed and whose own exit
        status was not 0 (a run exits 0 on a failure only when every failure is a known upstream defect it was told
        to accept: `--accept known-defect:ID`, forwarded to every run; EXIT_PARTIAL when, beyond those, something
        was not shown: the matrix judges that as partial)."""
        return [
            run.version
            for run in self.runs
            if run.result == "error" or (run.result == "failure" and run.exit_code not in (0, EXIT_PARTIAL))
        ]

    def document(self) -> dict[str, Any]:
        return {
            "apiVersion": "conformance.dra.example.com/v1alpha1",
            "kind": "ConformanceMatrix",
            "date": self.date,
            "kep": {"number": 5007, "url": KEP_URL},
            "profile": self.profile,
            "result": self.result,
            "releases": [_release_summary(run) for run in self.runs],
            "requirements": {
                req.id: {
                    "level": req.level,
                    "area": req.area,
                    "title": req.title,
                    "releases": {run.version: run.cell(req.id) for run in self.runs},
                }
                for req in SUITE_REQUIREMENTS
            },
            "unexplainedSkips": self.unexplained(),
        }


def _release_summary(run: ReleaseRun) -> dict[str, Any]:
    release = run.release
    cluster = (run.report or {}).get("cluster", {})
    return {
        "kubernetes": run.version,
        "result": run.result,
        # The two verdicts of the run (cluster: API/SCH on suite-owned drivers; implementation: IMP/SCALE).
        "verdicts": {k: v.get("result") for k, v in (run.report or {}).get("verdicts", {}).items()},
        "totals": (run.report or {}).get("totals", {}),
        "tests": run.tests,
        "runSeconds": run.run_seconds,
        "suiteWallSeconds": (run.report or {}).get("wallSeconds"),
        "bringUpSeconds": cluster.get("bringUpSeconds"),
        "buildSeconds": run.build_seconds,
        "exitCode": run.exit_code,
        "featureGates": cluster.get("featureGates", {}),
        "bindingTimeoutSeconds": cluster.get("bindingTimeoutSeconds"),
        "release": {
            "bindingConditionsGate": _gate_stage(release),
            "lockedGates": list(release.locked_gates),
            "bindingTimeout": "configurable"
            if release.binding_timeout_configurable
            else f"fixed {release.fixed_binding_timeout_seconds} s",
            "deviceTaintRule": release.device_taint_rule_version,
        },
        "reports": run.reports_dir,
        **({"note": run.note} if run.note else {}),
    }


def _gate_stage(release: Release) -> str:
    if "DRADeviceBindingConditions" in release.locked_gates:
        return "GA, locked on"
    return "beta, on" if release.binding_conditions_default_on else "alpha, turned on by the suite"


# -- writers -----------------------------------------------------------------------------------------------------
def write_matrix(matrix: Matrix, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"yaml": out / "matrix.yaml", "markdown": out / "matrix.md", "html": out / "matrix.html"}
    paths["yaml"].write_text(yaml.safe_dump(matrix.document(), sort_keys=False, allow_unicode=True))
    paths["markdown"].write_text(markdown(matrix))
    paths["html"].write_text(to_html(matrix))
    return paths


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.0f} s"


def _release_rows(matrix: Matrix) -> list[tuple[str, list[str]]]:
    summaries = [_release_summary(run) for run in matrix.runs]
    return [
        ("result", [s["result"] for s in summaries]),
        ("cluster verdict", [s["verdicts"].get("cluster", "") for s in summaries]),
        ("implementation verdict", [s["verdicts"].get("implementation", "") for s in summaries]),
        ("tests", [s["tests"] for s in summaries]),
        (
            "requirements passed / partial / failed / skipped",
            [
                " / ".join(str(s["totals"].get(k, 0)) for k in ("passed", "partial", "failed", "skipped"))
                for s in summaries
            ],
        ),
        ("DRADeviceBindingConditions", [s["release"]["bindingConditionsGate"] for s in summaries]),
        ("binding timeout", [s["release"]["bindingTimeout"] for s in summaries]),
        ("DeviceTaintRule", [s["release"]["deviceTaintRule"] for s in summaries]),
        ("suite run (pytest, incl. bring-up)", [_seconds(s["runSeconds"]) for s in summaries]),
        ("cluster bring-up", [_seconds(s["bringUpSeconds"]) for s in summaries]),
        ("binary build (once, cached)", [_seconds(s["buildSeconds"]) for s in summaries]),
    ]


def _cell_text(cell: dict[str, str], limit: int | None = None) -> str:
    """Symbol, outcome and reason; with `limit`, only the reason's first line, cut there (the YAML has all of it)."""
    text = f"{SYMBOL.get(cell['outcome'], '?')} {cell['outcome']}"
    reason = cell["reason"]
    if limit is not None and reason:
        first = reason.strip().splitlines()[0]
        reason = first if len(first) <= limit else first[:limit] + " …"
    return f"{text}: {reason}" if reason else text


def markdown(matrix: Matrix) -> str:
    versions = [run.version for run in matrix.runs]
    esc = lambda text: text.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [
        "# KEP-5007 device binding conditions: conformance across Kubernetes releases",
        "",
        f"Result: **{matrix.result}** · profile `{matrix.profile}` · {matrix.date} · [KEP-5007]({KEP_URL})",
        "",
        "| | " + " | ".join(versions) + " |",
        "|---|" + "---|" * len(versions),
    ]
    lines += [f"| {name} | " + " | ".join(esc(v) for v in values) + " |" for name, values in _release_rows(matrix)]
    lines += ["", "| requirement | " + " | ".join(versions) + " |", "|---|" + "---|" * len(versions)]
    for req in SUITE_REQUIREMENTS:
        cells = [esc(_cell_text(run.cell(req.id), limit=240)) for run in matrix.runs]
        lines.append(f"| **{req.id}** ({req.level}) {esc(req.title)} | " + " | ".join(cells) + " |")
    if unexplained := matrix.unexplained():
        lines += ["", "Skipped without a reason: " + ", ".join(unexplained)]
    lines += ["", "Each release's own reports: " + ", ".join(f"`{run.reports_dir}`" for run in matrix.runs), ""]
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:90%}th{background:#f4f4f4}
.passed{background:#e8f7e8}.partial{background:#eef7e0}.failed,.error{background:#fde2e2}.skipped,.not-judged{background:#fff6d9}.not-covered,.not-applicable{background:#eee}
"""


def to_html(matrix: Matrix) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(run.version)}</th>" for run in matrix.runs)
    rows = [
        f"<tr><th>{esc(name)}</th>" + "".join(f"<td>{esc(v)}</td>" for v in values) + "</tr>"
        for name, values in _release_rows(matrix)
    ]
    cells = []
    for req in SUITE_REQUIREMENTS:
        tds = []
        for run in matrix.runs:
            cell = run.cell(req.id)
            reason = f"<br><small>{esc(cell['reason'])}</small>" if cell["reason"] else ""
            tds.append(f'<td class="{esc(cell["outcome"])}">{esc(_cell_text({**cell, "reason": ""}))}{reason}</td>')
        cells.append(f"<tr><th>{esc(req.id)} ({req.level})<br><small>{esc(req.title)}</small></th>{''.join(tds)}</tr>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>KEP-5007 release matrix</title><style>{_CSS}"
        f"</style></head><body><h1>KEP-5007 device binding conditions: conformance across releases</h1>"
        f"<p>Result: <b>{esc(matrix.result)}</b> · profile <code>{esc(matrix.profile)}</code> · {esc(matrix.date)}"
        f" · <a href='{KEP_URL}'>KEP-5007</a></p>"
        f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"
        f"<table><tr><th>requirement</th>{head}</tr>{''.join(cells)}</table></body></html>\n"
    )
