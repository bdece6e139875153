"""One self-contained HTML page per run (no server, no external assets), rendered from a reports folder alone.

It reads conformance-report.yaml, timelines/*.json and artefacts/index.json, so `dra-conformance report` can render
it again from an unpacked bundle. Every link is relative to the folder or an anchor in the page; the KEP's address
is shown as text, since a reviewer's machine may have no network.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import yaml

from conformance.report.figures import scheduler_metrics_lines
from conformance.report.reasons import headline
from conformance.report.timeline import scenario_words, svg
from conformance.report.verdict import shown_outcome

PAGE = "report.html"
_STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1240px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border:1px solid #ddd;padding:4px 6px;
vertical-align:top;text-align:left}th{background:#f4f4f4}
.passed,.success{background:#dff3df}.failed,.failure{background:#f8d7d7}.skipped,.partial,.not-covered,.not-judged{background:#fff2cc}
.not-certified,.not-applicable{background:#eee}.verdict{display:inline-block;padding:10px 16px;margin:4px 12px 4px 0;
border-radius:6px;font-size:15px}pre{white-space:pre-wrap;margin:0;font-size:12px}small{color:#666}
.timeline{overflow-x:auto;border:1px solid #eee;margin:6px 0}
"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def _link(href: str, text: str | None = None) -> str:
    return f'<a href="{_e(href)}">{_e(text or href)}</a>'


def _verdicts(report: dict[str, Any], present: set[str]) -> str:
    out = ['<h2 id="verdicts">Verdicts</h2>']
    status = report.get("exitStatus")
    if report.get("headline"):  # both verdicts and the exit status in one line, as the terminal ends
        css = (
            "success" if status == 0 and report.get("result") == "success" else "partial" if status == 0 else "failure"
        )
        out.append(f'<p class="verdict {css}" id="headline"><b>{_e(report["headline"])}</b></p>')
    found = report.get("verdicts") or {"run": {"result": report.get("result"), "reasons": []}}
    for subject, v in found.items():
        reasons = "".join(f"<li><pre>{_e(r)}</pre></li>" for r in v.get("reasons", []))
        out.append(
            f'<div class="verdict {_e(v["result"])}"><b>{_e(subject)}</b>: {_e(v.get("summary") or v["result"])}</div>'
            + (f"<ul>{reasons}</ul>" if reasons else "")
        )
    ended = f"; exit status <b>{_e(status)}</b>" if status is not None else ""
    out.append(f"<p>Run result (the worst verdict): <b>{_e(report.get('result'))}</b>{ended}</p>")
    out += _known_defects(report, present)
    return "\n".join(out)


def _settings(report: dict[str, Any]) -> str:
    """The cluster's declared settings beside what each component runs (BASE-2): one row per setting."""
    settings = (report.get("cluster") or {}).get("settings")
    if not settings:
        return '<h2 id="settings">Declared and measured settings</h2><p>not measured: no cluster scenario ran</p>'
    declared, measured = settings.get("declared") or {}, settings.get("measured") or {}
    components = [c for c, v in measured.items() if isinstance(v, dict) and c != "bindingTimeout"]
    head = "<tr><th>setting</th><th>declared</th>" + "".join(f"<th>{_e(c)}</th>" for c in components) + "</tr>"
    rows = []
    for gate, want in (declared.get("featureGates") or {}).items():
        cells = []
        for c in components:
            reading = measured[c]
            if "unreadable" in reading:
                cells.append(f'<td class="skipped">not read: {_e(reading["unreadable"])}</td>')
                continue
            runs = (reading.get("featureGates") or {}).get(gate)
            shown = "not reported (not a gate of this release)" if runs is None else str(runs).lower()
            css = "" if runs is None else "passed" if runs == want else "failed"
            cells.append(f'<td class="{css}">{_e(shown)}</td>')
        rows.append(f"<tr><th>gate {_e(gate)}</th><td>{_e(str(want).lower())}</td>{''.join(cells)}</tr>")
    timeout = measured.get("bindingTimeout")
    shown = (
        ", ".join(f"{k} {v}" for k, v in timeout.items() if k != "declaredSeconds")
        if isinstance(timeout, dict)
        else timeout
    )
    configz = (measured.get("kube-scheduler") or {}).get("configzBindingTimeoutSeconds")
    if configz is not None:
        shown = f"{shown}; kube-scheduler /configz bindingTimeout {configz:g} s"
    span = max(1, len(components))
    rows.append(
        f"<tr><th>binding timeout (s)</th><td>{_e(declared.get('bindingTimeoutSeconds'))}</td>"
        f'<td colspan="{span}">{_e(shown)}</td></tr>'
    )
    return (
        '<h2 id="settings">Declared and measured settings</h2><p><small>judged by BASE-2 and SCH-6; gates from each '
        "component's /metrics (kubernetes_feature_enabled), the timeout from the scheduler's behaviour</small></p>"
        f"<table>{head}{''.join(rows)}</table>"
    )


def _writeup(defect: dict[str, Any], present: set[str]) -> str:
    """The write-up: a link to its copy in the reports folder (the bundle carries it), else its repository path."""
    copy = defect.get("writeupCopy")
    return _link(copy, defect["writeup"]) if copy in present else _e(defect["writeup"])


def _known_defects(report: dict[str, Any], present: set[str]) -> list[str]:
    """Known upstream defects the run hit, next to the verdicts: they explain failures, never hide them."""
    rows = [
        f'<tr class="failed"><td><b>{_e(d["id"])}</b></td><td>{_e(", ".join(d["requirements"]))} failed</td>'
        f"<td>{'accepted (--accept known-defect:' + _e(d['id']) + ')' if d['accepted'] else 'not accepted'}</td>"
        f"<td>{_e(d['summary'])}</td><td>{_e(', '.join(d['releases']))}</td><td>{_writeup(d, present)}</td></tr>"
        if not d.get("observedBy")
        else f"<tr><td><b>{_e(d['id'])}</b></td><td>observed by {_e(', '.join(d['observedBy']))}</td>"
        f"<td>fails no requirement</td><td>{_e(d['summary'])}</td><td>{_e(', '.join(d['releases']))}</td>"
        f"<td>{_writeup(d, present)}</td></tr>"
        for d in report.get("knownDefects") or []
    ]
    if not rows:
        return []
    head = "<tr><th>id</th><th>requirements</th><th>accepted</th><th>defect</th><th>releases</th><th>write-up</th></tr>"
    return [
        '<h3 id="known-defects">Known upstream defects (the requirements still fail)</h3>',
        f"<table>{head}{''.join(rows)}</table>",
    ]


def _identity(report: dict[str, Any]) -> str:
    rows = []
    for key in ("implementation", "cluster"):
        for name, value in (report.get(key) or {}).items():
            if key == "cluster" and name == "settings":
                continue  # its own table (_settings)
            shown = json.dumps(value) if isinstance(value, dict) else value
            rows.append(f"<tr><th>{_e(key)} {_e(name)}</th><td>{_e(shown)}</td></tr>")
    rows.append(f"<tr><th>date</th><td>{_e(report.get('date'))}</td></tr>")
    rows.append(f"<tr><th>wall time</th><td>{_e(report.get('wallSeconds'))} s</td></tr>")
    rows.append(f"<tr><th>KEP</th><td>{_e((report.get('kep') or {}).get('url'))}</td></tr>")
    return '<h2 id="identity">Cluster and implementation</h2><table>' + "".join(rows) + "</table>"


def _requirements(report: dict[str, Any], present: set[str]) -> str:
    rows = []
    for rid, e in (report.get("requirements") or {}).items():
        links = " ".join(_link(p, Path(p).name) for p in e.get("evidence", []) if p in present)
        reason = e.get("reason") or ""
        first = headline(reason)  # the same first line as the terminal and both JUnit files
        body = (
            f'<pre class="first">{_e(first)}</pre>'
            if reason.strip() == first
            else f'<details><summary class="first">{_e(first)}</summary><pre>{_e(reason)}</pre></details>'
        )
        phase = f"<br><small>judged in: {_e(e['judgedIn'])}</small>" if e.get("judgedIn") else ""  # suite/phases.py
        rows.append(
            f'<tr id="req-{_e(rid)}"><td><b>{_e(rid)}</b></td><td>{_e(e["level"])}</td><td>{_e(e.get("title"))}</td>'
            f'<td class="{_e(e["outcome"])}">{_e(shown_outcome(e))}{phase}</td><td>{body}</td><td>{links}</td></tr>'
        )
    head = "<tr><th>id</th><th>level</th><th>requirement</th><th>outcome</th><th>reason</th><th>evidence</th></tr>"
    return f'<h2 id="requirements">Requirements</h2><table>{head}{"".join(rows)}</table>'


def _scenarios(report: dict[str, Any], timelines: dict[str, dict[str, Any]], present: set[str]) -> str:
    # A node-local readiness gate has no fabric: its lanes show no attach, and the legend says nothing of one.
    fabric = (report.get("implementation") or {}).get("bindingModel") != "node-local"
    legend = (
        "(green), attached in the fabric (orange). The dashed line is the scenario's end; a device's lane follows "
        "the fabric until its detach."
        if fabric
        else "(green). The dashed line is the scenario's end."
    )
    out = [
        '<h2 id="scenarios">Scenarios and their timelines</h2>',
        "<p><small>Times are seconds from the scenario's start. Red diamonds are the moments that decide a "
        f"requirement (hover for time, detail, resourceVersion); bars: allocated (blue), conditions ready / pod bound "
        f"{legend}</small></p>",
    ]
    index = []
    for name, entry in sorted((report.get("scenarios") or {}).items()):
        shown = f'<a href="#sc-{_e(name)}">{_e(name)}</a>' if name in timelines else f"{_e(name)} (no timeline)"
        index.append(
            f'<tr><td>{shown}</td><td class="{_e(entry["outcome"] if entry["outcome"] != "passed" else "")}">'
            f"{_e(scenario_words(entry['outcome']))}{_again(entry)}</td><td>{_e(entry['seconds'])} s</td></tr>"
        )
    out.append("<table><tr><th>scenario</th><th>outcome</th><th>time</th></tr>" + "".join(index) + "</table>")
    judged: dict[str, list[str]] = {}  # scenario -> "IMP-3 failed" for each requirement its timeline evidences
    for rid, e in (report.get("requirements") or {}).items():
        for path in e.get("evidence", []):
            if path.startswith("timelines/") and path.endswith(".svg"):
                judged.setdefault(Path(path).stem, []).append(
                    f'<a href="#req-{_e(rid)}">{_e(rid)}</a> {_e(e["outcome"])}'
                )
    for name in sorted(timelines):
        t = timelines[name]
        files = [p for p in (f"timelines/{name}.json", f"timelines/{name}.svg") if p in present]
        moments = "".join(
            f"<tr><td>{m['t']:.3f}</td><td>{_e(m['lane'])}</td><td>{_e(m['what'])}</td><td>{_e(m['detail'])}</td>"
            f"<td>{_e(', '.join(m['decides']))}</td><td>{_e(m.get('revision') or '')}</td></tr>"
            for m in t["moments"]
        )
        out.append(
            f'<h3 id="sc-{_e(name)}">{_e(name)} <small>(scenario {_e(scenario_words(t["outcome"]))}, '
            f"{t['seconds']:.1f} s; namespaces {_e(', '.join(t['namespaces']) or '-')})</small></h3>"
            f"<p>Requirements judged on it: {', '.join(judged.get(name, [])) or '-'}</p>"
            f'<div class="timeline">{svg(t)}</div>'
            f"<p>{' '.join(_link(f) for f in files)}</p>"
            "<details><summary>every moment</summary><table><tr><th>s</th><th>lane</th><th>what</th><th>detail</th>"
            f"<th>decides</th><th>resourceVersion</th></tr>{moments}</table></details>"
        )
    return "\n".join(out)


def _figures(report: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v.get('median'))}</td><td>{_e(v.get('p95'))}</td><td>{_e(v.get('min'))}</td>"
        f"<td>{_e(v.get('max'))}</td><td>{_e(v.get('count'))}</td></tr>"
        for k, v in (report.get("measurements") or {}).items()
    )
    record = report.get("record") or {}
    probe = record.get("probe") or {}
    lines = [
        '<h2 id="figures">Measured figures</h2>',
        "<table><tr><th>figure</th><th>median</th><th>p95</th><th>min</th><th>max</th><th>n</th></tr>"
        + rows
        + "</table>",
    ]
    lines.append(_path_cost(report.get("pathCost")))
    lines.append(_scheduler_metrics(report.get("schedulerMetrics")))
    if record:
        lines.append(
            f"<p>Record: {_e(record.get('records'))}; dropped {_e(record.get('dropped', 0))}. Fabric probe: "
            f"{_e('none in the profile' if not probe.get('url') else json.dumps(probe))}</p>"
        )
    return "\n".join(lines)


def _scheduler_metrics(section: dict[str, Any] | None) -> str:
    """SCH-10: the SLI and the record's latencies, and the metrics' counts against the record per driver and status."""
    head = '<h3 id="scheduler-metrics">PreBind wait (kube-scheduler metrics, SCH-10)</h3>'
    if not section or "sli" not in section:
        return f"{head}<p>not read: {_e((section or {}).get('notJudged', 'the run did not judge SCH-10'))}</p>"
    lines = "".join(f"<li>{_e(line.strip())}</li>" for line in scheduler_metrics_lines(section))
    rows = "".join(
        f"<tr><td>{_e(r.get('scenario'))}</td><td>{_e(r['driver'])}</td><td>{_e(r['status'])}</td><td>{r['counted']}</td>"
        f"<td>{r['low']}{'' if r['low'] == r['high'] else '..' + str(r['high'])}</td><td>{r['observed']}</td>"
        f"<td>{r['observed_low']}{'' if r['observed_low'] == r['observed_high'] else '..' + str(r['observed_high'])}"
        "</td></tr>"
        for r in section.get("rows") or []
    )
    return (
        f"{head}<ul>{lines}</ul><table><tr><th>scenario</th><th>driver</th><th>status</th><th>allocations_total</th><th>record</th>"
        f"<th>wait_duration_seconds observations</th><th>record</th></tr>{rows}</table>"
    )


def _restart_matrix(report: dict[str, Any]) -> str:
    """IMP-8's restart matrix: each role's restart in each cell (the claim's state x the fabric's) with its outcome,
    and the combinations no cell stages, with why."""
    matrix = report.get("restartMatrix")
    head = '<h2 id="restart-matrix">Restart matrix (IMP-8)</h2>'
    if not matrix:
        return f"{head}<p>not run: scenario restart was not selected in this run</p>"
    cells = matrix.get("cells")
    if not isinstance(cells, list):
        return f"{head}<p>{_e(cells)}</p>"
    css = {
        "passed": "passed",
        "failed": "failed",
        "not walked": "failed",
        "not walked, staged again": "skipped",
        "not staged": "skipped",
    }
    seen = [c.get("lastSeen") or [c.get("why") or c.get("notWalked", "")] for c in cells]
    rows = "".join(
        f'<tr class="{css.get(c["outcome"], "")}"><td>{_e(c["role"])}</td><td>{_e(c["cell"])}</td>'
        f"<td>{_e(c.get('path', ''))}: {_e(c.get('step', ''))}</td><td>{_e(c['claim'])}</td>"
        f"<td>{_e(c['fabric'])}</td><td><b>{_e(c['outcome'])}</b></td>"
        f"<td>{_e(c['expected'])}</td><td><pre>{_e(chr(10).join(last))}</pre></td>"
        "</tr>"
        for c, last in zip(cells, seen, strict=True)
    )
    unreachable = "".join(
        f"<tr><td>{_e(u['claim'])}</td><td>{_e(u['fabric'])}</td><td>{_e(u['why'])}</td></tr>"
        for u in matrix.get("unreachable") or []
    )
    return (
        f"{head}<table><tr><th>role</th><th>cell</th><th>path: restarted after</th><th>claim</th><th>fabric</th>"
        f"<th>outcome</th><th>expected</th><th>last seen / why</th></tr>{rows}</table>"
        f"<h3>Combinations no cell stages</h3><table><tr><th>claim</th><th>fabric</th><th>why</th></tr>{unreachable}"
        "</table>"
    )


def _path_cost(cost: dict[str, Any] | None) -> str:
    """COST-1..3: the fair single pod's path against its binding model's minimum, and its timeline."""
    if not cost:
        return '<h3 id="path-cost">Path cost</h3><p>not measured: the path-cost scenario did not run or did not end</p>'
    rounds, attaches, seconds = cost["schedulingRounds"], cost["attaches"], cost["allocationToBindingSeconds"]
    rows = [
        ("scheduling rounds (COST-1)", rounds["measured"], f"minimum {rounds['minimum']}"),
        (
            "attaches (COST-2)",
            "not probed" if attaches["measured"] is None else attaches["measured"],
            f"minimum {attaches['minimum']}; detaches on the way {attaches['detachesOnTheWay'] or 0}",
        ),
        ("allocation to binding, s (COST-3)", seconds["measured"], f"bound {seconds['bound']:g}"),
    ]
    body = "".join(f"<tr><td>{_e(a)}</td><td>{_e(b)}</td><td>{_e(c)}</td></tr>" for a, b, c in rows)
    detours = "".join(f"<li>{_e(d)}</li>" for d in cost.get("detours") or [])
    steps = _e("\n".join(cost.get("timeline") or []))
    return (
        f'<h3 id="path-cost">Path cost</h3><p>One pod alone on the implementation, binding model '
        f"<code>{_e(cost['bindingModel'])}</code>, node <code>{_e(cost['node'])}</code></p>"
        f"<table><tr><th>figure</th><th>measured</th><th>against</th></tr>{body}</table>"
        + (f"<p>Detours:</p><ul>{detours}</ul>" if detours else "<p>No detour: the binding model's minimum.</p>")
        + "<details><summary>the path (s from the first allocation, etcd revision or probe)</summary>"
        f"<pre>{steps}</pre></details>"
    )


def _artefacts(report: dict[str, Any], folder: Path, present: set[str]) -> str:
    index_path = folder / "artefacts" / "index.json"
    files = ["conformance-report.yaml", "certification-junit.xml", "junit.xml", "MANIFEST.sha256"]
    rows = [f"<tr><td>{_link(f)}</td><td></td><td></td><td></td></tr>" for f in files if f in present]
    bound = ""
    if index_path.exists():
        index = json.loads(index_path.read_text())
        bound = (
            f"<p>Size bound: {index['fileLimitBytes']} bytes per file (head and tail kept), {index['totalLimitBytes']}"
            f" bytes in all; kept {index['keptBytes']} bytes; gathering took {index['gatherSeconds']} s. "
            f"{_link('artefacts/index.json')}</p>"
        )
        for rel, entry in sorted(index["files"].items()):
            path = f"artefacts/{rel}"
            name = _link(path, rel) if path in present else _e(rel)
            cut = "cut" if entry["keptBytes"] < entry["bytes"] else ""
            rows.append(
                f"<tr><td>{name}</td><td>{_e(entry.get('what', ''))}</td><td>{entry['bytes']}</td>"
                f"<td>{_e(entry.get('omitted') or cut)}</td></tr>"
            )
    head = "<tr><th>file</th><th>what</th><th>bytes</th><th>bound</th></tr>"
    return f'<h2 id="artefacts">Artefacts</h2>{bound}<table>{head}{"".join(rows)}</table>'


def render(folder: Path, out: Path | None = None) -> Path:
    """Write `report.html` for a reports folder (or to `out`); returns its path."""
    report = yaml.safe_load((folder / "conformance-report.yaml").read_text())
    present = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    timelines = {}
    for path in sorted((folder / "timelines").glob("*.json")):
        timelines[path.stem] = json.loads(path.read_text())
    impl = (report.get("implementation") or {}).get("profile", "?")
    cluster = report.get("cluster") or {}
    title = (
        f"KEP-5007 conformance: {impl} on Kubernetes {cluster.get('kubernetes', '?')} ({cluster.get('provider', '?')})"
    )
    nav = " · ".join(
        f'<a href="#{a}">{t}</a>'
        for a, t in (
            ("verdicts", "verdicts"),
            ("requirements", "requirements"),
            ("scenarios", "timelines"),
            ("figures", "figures"),
            ("restart-matrix", "restart matrix"),
            ("settings", "settings"),
            ("identity", "identity"),
            ("artefacts", "artefacts"),
        )
    )
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{_e(title)}</h1><p>{nav}</p>"
        + _verdicts(report, present)
        + _requirements(report, present)
        + _scenarios(report, timelines, present)
        + _figures(report)
        + _restart_matrix(report)
        + _settings(report)
        + _identity(report)
        + _artefacts(report, folder, present)
        + "</body></html>"
    )
    target = out or folder / PAGE
    target.write_text(page)
    return target


def _again(entry: dict[str, Any]) -> str:
    """The attempt that was judged, when an earlier one met the cluster's fault (suite/runner.py's ATTEMPTS)."""
    if not entry.get("ranAgainBecause"):
        return ""
    why = "; ".join(str(w) for w in entry["ranAgainBecause"])
    return f"<br><small>attempt {_e(entry.get('attempt'))}, run again because {_e(why)}</small>"
