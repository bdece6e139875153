"""`dra-conformance run`: the whole suite, with the suite's own exit status (what `make conformance` calls).

GNU make turns any failing recipe into its own status 2, so CI that must tell success, failure and partial apart
runs this command (or reads the status this command prints on its last line, which `make conformance` shows too).
The line before it repeats the run's headline (both verdicts and the exit status, report/headline.py), which pytest's
own summary lines would otherwise follow.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import pytest
import yaml

from conformance.report.verdict import EXIT_KNOWN_DEFECT, EXIT_PARTIAL

SUITE = Path(__file__).resolve().parents[1] / "suite"
# What each status means (README "Verdicts and exit status" says the same; tests/test_run_command.py keeps them equal).
MEANINGS = {
    0: "success",
    1: "failure: a requirement failed",
    2: "interrupted",
    3: "internal error (also: the cluster or the implementation could not start)",
    4: "usage error",
    5: "no tests collected",
    EXIT_PARTIAL: "partial: a MUST requirement was not shown to pass",
    EXIT_KNOWN_DEFECT: "failure: every failure a known upstream defect of the cluster's release, not accepted",
}


RUN_STATUS = "run-status.txt"  # in the reports folder: the run's last lines, as the terminal showed them
ACCEPTED_ONLY = "success but for known upstream defects accepted: the headline names them"


def status_line(status: int, headline: str = "") -> str:
    """The last line of a run: the status and what it means, the same words as README's exit table; a 0 whose run
    failed only on accepted known upstream defects says so (the headline names them)."""
    meaning = MEANINGS.get(status, "unknown")
    if status == 0 and "(accepted)" in headline:
        meaning = ACCEPTED_ONLY
    return f"dra-conformance run: exit status {status} ({meaning})"


def _headline(report: Path, since: float) -> str:
    """The run's headline (both verdicts and the exit status) from the report this run wrote, if it wrote one."""
    try:
        if report.stat().st_mtime < since:
            return ""  # an earlier run's: this one ended before writing its report
        return str(yaml.safe_load(report.read_text()).get("headline") or "")
    except (OSError, yaml.YAMLError, AttributeError):
        return ""


@click.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--provider", default="local", show_default=True, help="local, kind or existing")
@click.option("--k8s-version", default="1.37.2", show_default=True, help="Kubernetes release of the cluster")
@click.option("--profile", default=None, help="implementation profile (YAML) or 'none'; default: the reference")
@click.option("--kubeconfig", default=None, help="with --provider existing: the cluster's kubeconfig")
@click.option("--reports-dir", default="reports", show_default=True, type=click.Path(file_okay=False))
@click.option("--accept", multiple=True, help="partial, or known-defect:ID (repeatable), as the suite's --accept")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def run_command(
    provider: str,
    k8s_version: str,
    profile: str | None,
    kubeconfig: str | None,
    reports_dir: str,
    accept: tuple[str, ...],
    pytest_args: tuple[str, ...],
) -> None:
    """Run the suite (pytest conformance/suite with the reports written to --reports-dir) and exit with its status:
    0 success, 1 failure, 6 partial, 7 only unaccepted known upstream defects, 2-5 pytest's own. Arguments after
    `--` go to pytest (e.g. `-- -k binding`)."""
    reports = Path(reports_dir)
    reports.mkdir(parents=True, exist_ok=True)
    args = [str(SUITE), "--provider", provider, "--k8s-version", k8s_version]
    if profile:
        args += ["--profile", profile]
    if kubeconfig:
        args += ["--kubeconfig", kubeconfig]
    args += [f"--junitxml={reports / 'junit.xml'}", f"--alluredir={reports / 'allure'}", f"--reports-dir={reports}"]
    for value in accept:
        args += ["--accept", value]
    args += list(pytest_args)
    began = time.time()
    status = int(pytest.main(args))
    headline = _headline(reports / "conformance-report.yaml", began)
    last = [headline] if headline else []  # after pytest's own summary lines
    last.append(status_line(status, headline))
    for line in last:
        click.echo(line)
    # The lines as printed, for CI and for the check that README quotes a real run word for word (make docs-match).
    (reports / RUN_STATUS).write_text("\n".join(last) + "\n")
    sys.stdout.flush()
    sys.exit(status)
