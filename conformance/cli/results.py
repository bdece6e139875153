"""`report`, `check-html`, `bundle`, `compare`, `figures`, `soak`: read what suite runs left behind."""

from __future__ import annotations

import sys
from pathlib import Path

import click

_results = click.argument("source", type=click.Path(exists=True, path_type=Path))


@click.command("report")
@_results
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="for a bundle: the folder to unpack it into (default: next to the bundle, named after it)",
)
@click.option("--check/--no-check", default=False, help="also render it in headless chromium and check every link")
def report_command(source: Path, out: Path | None, check: bool) -> None:
    """Render the HTML report (report.html) of a reports folder, or of a results bundle: the bundle is unpacked,
    its checksums verified, and the page written among its files (its links point there)."""
    import shutil

    from conformance.report.bundle import BundleError, open_results
    from conformance.report.html import render

    try:
        folder, tmp = open_results(source)
    except BundleError as exc:
        raise click.ClickException(str(exc)) from None
    if tmp is not None:
        target = out or source.with_name(source.name.removesuffix(".gz").removesuffix(".tar").removesuffix(".tgz"))
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)
        tmp.cleanup()
        folder = target
    page = render(folder)
    click.echo(f"wrote {page}")
    if check:
        _check_html(page, page.with_suffix(".png"))


def _check_html(page: Path, screenshot: Path) -> None:
    from conformance.report.browser import check_page

    try:
        result = check_page(page, screenshot)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"chromium rendered {page}: {result.links} links, {result.svgs} timelines; screenshot {screenshot}")
    if result.problems:
        raise click.ClickException("\n".join(result.problems))


@click.command("check-html")
@click.argument("page", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--screenshot", type=click.Path(path_type=Path), default=None)
def check_html(page: Path, screenshot: Path | None) -> None:
    """Render an HTML report in headless chromium, keep a screenshot, and check that every link resolves."""
    _check_html(page, screenshot or page.with_suffix(".png"))


@click.command("bundle")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="default: <folder>/results.tar.gz")
def bundle_command(folder: Path, out: Path | None) -> None:
    """Pack a reports folder into a results bundle (tar.gz) with a SHA-256 manifest of every file."""
    from conformance.report.bundle import make_bundle

    click.echo(f"wrote {make_bundle(folder, out)}")


@click.command("compare")
@click.argument("old", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
def compare_command(old: Path, new: Path) -> None:
    """List the requirements whose outcome changed from run OLD to run NEW (folders or bundles); exit 1 when one
    that passed in OLD does not pass in NEW (a regression)."""
    from conformance.report.bundle import BundleError, compare, load_report

    try:
        changes = compare(load_report(old), load_report(new))
    except BundleError as exc:
        raise click.ClickException(str(exc)) from None
    if not changes:
        click.echo("no requirement changed its outcome")
    for c in changes:
        mark = "REGRESSION " if c["regression"] == "True" else ""
        click.echo(
            f"{mark}{c['requirement']}: {c['before']} -> {c['after']}" + (f": {c['reason']}" if c["reason"] else "")
        )
    if any(c["regression"] == "True" for c in changes):
        sys.exit(1)


@click.command("figures")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--history",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="keep the figures in this folder and print what got slower since the previous bench",
)
def figures_command(report: Path, history: Path | None) -> None:
    """Print the benchmark figures of a suite run from its conformance-report.yaml."""
    import yaml

    from conformance.cluster.bench_history import compare_and_record, suite_figures
    from conformance.report.figures import print_figures

    print_figures(report)
    if history is not None:
        for line in compare_and_record(history, "suite", suite_figures(yaml.safe_load(report.read_text()))):
            click.echo(line)


@click.command("soak")
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def soak_command(folders: tuple[Path, ...]) -> None:
    """Summarise a soak (`make soak`): per profile its runs, per test how often it failed, and the spread of every
    figure. Several FOLDERS are the shards of one soak (each `make soak REPORTS=...`'s soak folder), merged."""
    from conformance.report.soak import report

    raise SystemExit(report(*folders))
