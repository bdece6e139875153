"""A lifecycle run's reports, in the shape `dra-conformance review` merges: conformance-report.yaml (the judged
requirements, as a suite run writes them, plus `lifecycle`: steps, findings, observations, checks), lifecycle.md (the
same for a reader) and results.tar.gz (the bundle with its checksums)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.lifecycle.ledger import Ledger
from conformance.report.bundle import make_bundle
from conformance.report.outcomes import verdict, write_conformance_report


def write_reports(out: Path, ledger: Ledger, cluster: dict[str, Any], variant: str | None) -> tuple[Path, str]:
    """Write the three files into `out`; return the bundle and the result (success, partial, failure)."""
    out.mkdir(parents=True, exist_ok=True)
    summary = {rid: e for rid, e in ledger.summary().items() if e["outcome"] != "not-covered"}
    lifecycle = {**ledger.document(), **({"variant": variant} if variant else {})}
    run = {
        "cluster": cluster,
        "implementation": {"profile": f"none (lifecycle {ledger.kind}{f', variant {variant}' if variant else ''})"},
        "lifecycle": lifecycle,
    }
    write_conformance_report(out / "conformance-report.yaml", summary, run)
    result = verdict(summary) if summary else "partial"
    (out / "lifecycle.md").write_text(markdown(ledger, cluster, summary, result, variant))
    return make_bundle(out), result


def markdown(
    ledger: Ledger, cluster: dict[str, Any], summary: dict[str, dict[str, Any]], result: str, variant: str | None
) -> str:
    esc = lambda text: str(text).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    title = f"KEP-5007 lifecycle run ({ledger.kind}): Kubernetes {cluster.get('kubernetes')}"
    lines = [f"# {title}", "", f"result **{result}**, {ledger.seconds:.0f} s"]
    if variant:
        lines += ["", f"Broken variant **{variant}** (a wrong procedure on purpose: its checks must fail)."]
    if ledger.stopped:
        lines += ["", f"**Stopped before its last step:** {esc(ledger.stopped)}"]
    if ledger.not_applicable:
        lines += ["", f"**Not applicable** (nothing was started): {esc(ledger.not_applicable)}"]
    lines += [
        "",
        "## Requirements",
        "",
        "| requirement | outcome | checks | first failure, or why not judged |",
        "|---|---|---|---|",
    ]
    for rid, e in summary.items():
        reason = e["reason"] if e["outcome"] != "passed" else ""
        lines.append(f"| {rid} {esc(e['title'])} | {e['outcome']} | {e.get('checks', 0)} | {esc(reason)} |")
    lines += ["", "## The KEP's text beside what the binaries did", ""]
    for f in ledger.findings:
        mark = "agrees" if f.agrees else "**differs**"
        lines += [f'- **{f.question}** ({mark}). KEP: "{esc(f.kep)}" Measured: {esc(f.measured)}.']
    lines += ["", "## Steps", "", "| step | components | restart s |", "|---|---|---|"]
    for s in ledger.steps:
        comps = "; ".join(f"{c} {v}" for c, v in s["components"].items())
        lines.append(f"| {esc(s['step'])} | {esc(comps)} | {s['switchSeconds']} |")
    lines += ["", "## What each kind of object did", "", "| step | object | what |", "|---|---|---|"]
    lines += [f"| {esc(o.step)} | {esc(o.subject)} | {esc(o.what)} |" for o in ledger.observations]
    if ledger.logs:
        lines += ["", "## Component logs", "", "Each restart is marked in its component's log (`--- restarted by"]
        lines[-1] += " dra-conformance: ... ---`, with the command line it ran)."
        lines += ["", *(f"- [{path}]({path})" for path in ledger.logs)]
    failed = [c for c in ledger.checks if not c.ok]
    if failed:
        lines += ["", "## Failed checks", ""]
        lines += [f"- {c.requirement} [{esc(c.step)}] {esc(c.what)}" for c in failed]
    return "\n".join(lines) + "\n"
