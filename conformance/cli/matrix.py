"""`matrix`: the whole suite on every release and its exit status."""

from __future__ import annotations

from pathlib import Path

import click

from conformance.cli.options import releases_option
from conformance.cluster.versions import KubeVersion
from conformance.report.verdict import EXIT_PARTIAL


@click.command("matrix")
@releases_option("a release to run (repeatable); default: the newest known version of every supported minor")
@click.option("--profile", default="fixtures/profiles/reference.yaml", show_default=True)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/matrix"), show_default=True
)
@click.option("--report-only", is_flag=True, help="run nothing: build the matrix from the reports already in --out")
@click.option(
    "--accept",
    multiple=True,
    callback=lambda ctx, param, values: _matrix_accepts(values),
    help="'partial': exit 0 for a partial matrix (a release that cannot show some requirement, each skip with its "
    "reason); 'known-defect:ID': passed to every release's run, so a release whose only failures are that known "
    "upstream defect does not fail the exit status (its column still reads failed). Repeatable",
)
@click.argument("pytest_args", nargs=-1)
def matrix_command(
    releases: list[KubeVersion],
    profile: str,
    out: Path,
    report_only: bool,
    accept: tuple[str, ...],
    pytest_args: tuple[str, ...],
) -> None:
    """The whole suite on every release, one at a time, and one matrix report (Markdown, HTML, YAML)."""
    from conformance.matrix import run_matrix, supported_versions

    forwarded = tuple(f"--accept={value}" for value in accept)  # each release's own exit status judges them
    matrix, paths = run_matrix(
        releases or supported_versions(), out, profile, (*forwarded, *pytest_args), report_only=report_only
    )
    for run in matrix.runs:
        totals = ", ".join(f"{n} {k}" for k, n in (run.report or {}).get("totals", {}).items())
        seconds = f"{run.run_seconds:.0f}s" if run.run_seconds is not None else ""
        click.echo(f"{run.version:16} {run.result:8} {seconds:>6}  {totals or run.note[:100]}")
    click.echo(f"matrix: {matrix.result}; " + ", ".join(str(p) for p in paths.values()))
    if failing := matrix.failing():
        click.echo(f"matrix: exit status 1: {', '.join(failing)} failed (the table gives each failure)", err=True)
        raise SystemExit(1)
    if matrix.result == "failure":  # each failed run exited 0 or partial: its failures were accepted known defects
        known = ", ".join(v for v in accept if v != "partial")
        click.echo(f"matrix: the failed releases failed only on accepted known upstream defects ({known})", err=True)
    partial = matrix.result == "partial" or any(run.exit_code == EXIT_PARTIAL for run in matrix.runs)
    if partial and "partial" not in accept:
        click.echo(
            f"matrix: exit status {EXIT_PARTIAL}: some release did not show every MUST requirement (the table gives "
            "each reason); pass --accept partial for a matrix that knowingly includes such a release",
            err=True,
        )
        raise SystemExit(EXIT_PARTIAL)


def _matrix_accepts(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--accept` values of the matrix, checked as a run checks its own (defects.check_accepts)."""
    from conformance.cluster.defects import check_accepts

    try:
        check_accepts(list(values))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return values
