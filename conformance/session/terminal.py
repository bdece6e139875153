"""The run's terminal summary: the requirements table, what was not shown to pass, not applicable or a known upstream
defect, the verdicts and what the exit status says, ending with the run's headline; and the cluster the run used."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance.cluster import interrupts
from conformance.report.figures import scheduler_metrics_lines
from conformance.report.outcomes import not_applicable, not_shown, table
from conformance.report.verdict import EXIT_KNOWN_DEFECT, EXIT_PARTIAL, NOT_CERTIFIED, KnownFailures, Verdict
from conformance.session.metrics import METRICS_KEY
from conformance.session.shared import CLUSTER_KEY, CLUSTER_RUNNER_KEY, MARKS_KEY
from conformance.suite.declared import settings_report, settings_summary


def cluster_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The cluster the run used (provider, release, gates, measured settings) and where the run's time went."""
    if CLUSTER_KEY not in config.stash:
        return
    info, timings = config.stash[CLUSTER_KEY]
    gates = ", ".join(f"{k}={str(v).lower()}" for k, v in info.feature_gates.items()) or "release defaults"
    timeout = f"{info.binding_timeout_s}s" + ("" if info.binding_timeout_configurable else " (fixed by the release)")
    terminalreporter.section("KEP-5007 cluster")
    built = f"; built from {info.source.describe()}" if info.patched and info.source else ""
    terminalreporter.write_line(f"provider {info.provider}, Kubernetes {info.version}, {len(info.nodes)} nodes{built}")
    terminalreporter.write_line(f"feature gates set: {gates}; binding timeout {timeout}")
    if CLUSTER_RUNNER_KEY in config.stash:
        measured = settings_report(info, config.stash[CLUSTER_RUNNER_KEY])["measured"]
        terminalreporter.write_line(f"measured (BASE-2): {settings_summary(measured)}")
    if (metrics := config.stash.get(METRICS_KEY, None)) is not None:  # SCH-10: the SLI beside the record's latencies
        for line in scheduler_metrics_lines(metrics.report()):
            terminalreporter.write_line(line)
    if "bring_up_s" in timings:
        terminalreporter.write_line(f"bring-up {timings['bring_up_s']:.1f}s")
    if marks := config.stash.get(MARKS_KEY, {}):
        moments = sorted(marks.items(), key=lambda kv: kv[1])
        terminalreporter.write_line("run phases (s from start): " + ", ".join(f"{k} {v:.1f}" for k, v in moments))


class TerminalSummary:
    """The requirement reporter's terminal summary (mixed into RequirementReporter, whose outcomes it shows)."""

    config: pytest.Config
    started: float
    summary: dict[str, dict[str, Any]]
    verdicts: dict[str, Verdict]
    result: str | None
    known_failures: KnownFailures | None
    packaging: str
    exit_status: int
    headline: str
    if TYPE_CHECKING:  # RequirementReporter's

        @property
        def model(self) -> str | None: ...

        def known_defects(self) -> list[dict[str, Any]]: ...

    @pytest.hookimpl(trylast=True)  # after the cluster's section: the headline is the suite's last line
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if self.result is None:
            return
        summary = self.summary
        write = terminalreporter.write_line
        terminalreporter.section("KEP-5007 requirements")
        for line in table(summary):
            write(line)
        missing = not_shown(summary)
        if missing:
            terminalreporter.section("KEP-5007: NOT SHOWN TO PASS", red=True, bold=True)
            for line in missing:
                failed = re.match(r"\S+ +(MUST|SHOULD|MAY) +failed\b", line) is not None  # not "... failed before"
                write(line, red=failed, yellow=not failed, bold=True)
        if apart := not_applicable(summary):
            title = f"KEP-5007: NOT APPLICABLE to bindingModel {self.model} (not run; counted out of the verdict)"
            terminalreporter.section(title, cyan=True)
            for line in apart:
                write(line, cyan=True)
        if known := self.known_defects():
            terminalreporter.section("KEP-5007: KNOWN UPSTREAM DEFECTS (the requirements still fail)", red=True)
            for d in known:
                if d.get("observedBy"):
                    seen = f"observed by {', '.join(d['observedBy'])} (fails no requirement)"
                    write(f"{d['id']}: {seen}; write-up {d['writeup']}", bold=True)
                    write(f"  {d['summary']}")
                    continue
                taken = "ACCEPTED (--accept known-defect:" + d["id"] + ")" if d["accepted"] else "not accepted"
                write(f"{d['id']}: {', '.join(d['requirements'])} failed; {taken}; write-up {d['writeup']}", bold=True)
                write(f"  {d['summary']}")
        terminalreporter.section("KEP-5007 verdicts")
        for subject, found in self.verdicts.items():
            colour = {"success": "green", "failure": "red"}.get(found.result, "yellow")
            shown = found.result.upper() + found.shown.removeprefix(found.result)
            write(f"{subject} verdict: {shown}", bold=True, **{colour: True})
            for reason in found.reasons[: 30 if found.result != NOT_CERTIFIED else 1]:
                write(f"  - {(reason.splitlines() or [''])[0]}")  # "ID LEVEL outcome: <its first line>" (verdict.py)
        status = self.config.getoption("--accept")
        if stopped_by := interrupts.interrupted():
            write(
                f"interrupted by {stopped_by} after {time.monotonic() - self.started:.0f}s: "
                "requirements not reached are not-covered"
            )
        judged = self.result  # what the exit status judges beyond accepted known defects
        if known and self.known_failures is not None and self.known_failures.only_known():
            if unaccepted := sorted(self.known_failures.unaccepted()):
                write(
                    f"exit status {EXIT_KNOWN_DEFECT}: every failure is a known upstream defect, not accepted: "
                    f"{', '.join(unaccepted)} (--accept known-defect:ID accepts one explicitly)",
                    red=True,
                    bold=True,
                )
            else:
                judged = self.known_failures.rest()
                write(
                    f"every failure is an accepted known upstream defect: the exit status judges the rest of the run "
                    f"({judged})",
                    red=True,
                    bold=True,
                )
        if judged == "partial":
            if "partial" in status:
                write("partial result accepted (--accept partial): exit status 0", yellow=True, bold=True)
            else:
                write(
                    f"exit status {EXIT_PARTIAL}: a MUST requirement was not shown to pass; pass --accept partial "
                    "for a run that knowingly covers a subset",
                    yellow=True,
                    bold=True,
                )
        if reports_dir := self.config.getoption("--reports-dir"):
            write(f"reports: {Path(reports_dir).resolve()}; {self.packaging}")
        # Last: both verdicts and the exit status in one line (the YAML's and the HTML's headline).
        clean = self.exit_status == 0 and all(v.result in ("success", NOT_CERTIFIED) for v in self.verdicts.values())
        colour = "green" if clean else "yellow" if self.exit_status == 0 else "red"
        write(self.headline, bold=True, **{colour: True})
