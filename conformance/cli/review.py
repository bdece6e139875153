"""`review`: merge result bundles into the enhancement review's page and JUnit; with --run, first run the suite on
every release whose binaries are cached (what `make review` does)."""

from __future__ import annotations

import itertools
import shlex
import sys
from pathlib import Path

import click

from conformance.cli.options import releases_option
from conformance.cluster.versions import KubeVersion


def _cached(version: KubeVersion) -> bool:
    from conformance.cluster.toolchain.build import is_cached

    return is_cached(version)


def _oldest_first(versions: list[KubeVersion]) -> list[KubeVersion]:
    return sorted(versions, key=lambda v: (v.major, v.minor, v.patch))


def _build_missing(versions: list[KubeVersion]) -> dict[str, str]:
    """--build: each release's binaries built where the cache lacks them (a cold build takes 10-25 min on 2 cores),
    oldest first (1.35's upgrade needs 1.34's); per release whose build failed, why (it is then named as not run)."""
    from conformance.cluster.toolchain.build import ensure_binaries
    from conformance.cluster.toolchain.gobuild import BuildError

    failed = {}
    for version in _oldest_first(versions):
        if _cached(version):
            continue
        print(f"review: Kubernetes {version}: not in the cache, building it first", file=sys.stderr, flush=True)
        try:
            ensure_binaries(version)
        except BuildError as exc:
            failed[str(version)] = f"its build failed: {str(exc).splitlines()[0][:300]}"
    return failed


def _run_releases(
    versions: list[KubeVersion], out: Path, profile: str, args: tuple[str, ...]
) -> tuple[list[Path], dict[str, str]]:
    """Run the suite on each release whose binaries are cached (never a build here: a cold one takes most of an
    hour); the bundles written and, per release without one, why."""
    from conformance.matrix import run_release

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    bundles, missing = [], {}
    for version in versions:
        if not _cached(version):
            missing[str(version)] = (
                f"no binaries of {version} in the cache: not run (`dra-conformance build --k8s-version {version}` "
                "builds them, then `make review` again)"
            )
            say(f"review: Kubernetes {version}: {missing[str(version)]}")
            continue
        run = run_release(version, out, profile, args, say)
        bundle = Path(run.reports_dir) / "results.tar.gz"
        if run.report is None or not bundle.exists():
            missing[str(version)] = f"the run left no results bundle: {run.note or 'see its pytest.log'}"
        else:
            bundles.append(bundle)
    return bundles, missing


def _run_lifecycle(versions: list[KubeVersion], out: Path) -> tuple[list[Path], list[str]]:
    """The lifecycle runs of the releases (cached binaries only): `gates` on each release whose gate can be switched,
    `upgrade` on each pair of adjacent minors among them; the bundles written and, per run not made, why."""
    from conformance.lifecycle.run import run_gates, run_upgrade

    bundles, notes = [], []
    ordered = _oldest_first(versions)
    for version in ordered:
        # A release whose gate is locked on is run too: it starts nothing and writes GATE-1..3 not applicable with the
        # reason, so PRR-2/3 read "not applicable" there, not "not answered" (make review of 2026-12-07 skipped it).
        locked = version.release.gate_off_reason("DRADeviceBindingConditions")
        if not locked and not _cached(version):
            notes.append(f"gates on {version}: no binaries of {version} in the cache")
        else:
            bundles.append(run_gates(version, out / f"gates-{version}").bundle)
    for old, new in itertools.pairwise(ordered):
        if (new.major, new.minor) != (old.major, old.minor + 1):
            continue
        if not (_cached(old) and _cached(new)):
            notes.append(f"upgrade {old} <-> {new} (and its skew): no binaries of both in the cache")
            continue
        bundles.append(run_upgrade(old, new, out / f"upgrade-{old}-{new}").bundle)
    return bundles, notes


@click.command("review")
@click.argument("bundles", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/review"), show_default=True
)
@click.option(
    "--run",
    "run_suite",
    is_flag=True,
    help="first run the suite on every supported release whose binaries are cached (or each --release), one at a "
    "time, into OUT/runs/<version>/, and merge those bundles too; a release without cached binaries is named as "
    "not run",
)
@releases_option(
    "with --run: a release to run (repeatable); default: the newest known version of every supported minor"
)
@click.option("--profile", default="fixtures/profiles/reference.yaml", show_default=True, help="with --run")
@click.option("--accept", multiple=True, help="with --run: passed to every release's run (e.g. known-defect:ID)")
@click.option("--pytest-args", default="", help='with --run: more pytest arguments, one string (e.g. "-k gate")')
@click.option(
    "--scale",
    "scale_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="figures of `make scale` (reports/scale/scale.json; repeatable) that answer GA-3 (5000+ nodes); default: "
    "the curve committed as docs/figures/scale.json, the one docs/performance.md quotes",
)
@click.option(
    "--build",
    is_flag=True,
    help="with --run: build the binaries of a release the cache lacks first (what `make review` does on a fresh "
    "machine; 10-25 min a release on 2 cores) instead of naming it as not run",
)
@click.option(
    "--lifecycle/--no-lifecycle",
    default=True,
    show_default=True,
    help="with --run: also the lifecycle runs (`dra-conformance lifecycle gates` per release whose gate can be "
    "switched, `upgrade` per pair of adjacent releases), into OUT/lifecycle/; 209 s and 245 s each here (loaded)",
)
def review_command(
    bundles: tuple[Path, ...],
    out: Path,
    run_suite: bool,
    releases: list[KubeVersion],
    profile: str,
    accept: tuple[str, ...],
    pytest_args: str,
    scale_files: tuple[Path, ...],
    build: bool,
    lifecycle: bool,
) -> None:
    """Merge result bundles (results.tar.gz of runs of several releases, profiles, machines or CI shards) into one
    review page (review.html, review.md) and one JUnit (review-junit.xml): each KEP-5007 test-plan line, graduation
    criterion and PRR question with the requirements that answer it, their outcomes per release, the figures and
    the known upstream defects per release; questions no run answers yet are listed as such. GA-3 (5000+ nodes) is
    answered from the figures of `make scale` (--scale), not from a suite run."""
    from conformance.matrix import supported_versions
    from conformance.report.bundle import BundleError
    from conformance.report.review import Review, load_runs
    from conformance.report.review_write import write_review
    from conformance.report.scale_evidence import FIGURES_FILE, load_points

    sources, missing, notes = list(bundles), {}, []
    if run_suite:
        args = (*(f"--accept={a}" for a in accept), *shlex.split(pytest_args))
        versions = releases or supported_versions()
        unbuilt = _build_missing(versions) if build else {}
        ran, missing = _run_releases(versions, out / "runs", profile, args)
        missing.update(unbuilt)  # the build's cause, not "not in the cache"
        sources += ran
        if lifecycle:
            made, notes = _run_lifecycle(versions, out / "lifecycle")
            sources += made
    if not sources:
        raise click.ClickException(
            "no results bundle to review" + (f": {'; '.join(missing.values())}" if missing else "")
        )
    figures = list(scale_files) or ([FIGURES_FILE] if FIGURES_FILE.exists() else [])
    try:
        review = Review(load_runs(sources), missing, *load_points(figures), notes=notes)
    except (BundleError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    paths = write_review(review, out)
    counts: dict[str, int] = {}
    for row in review.answers():
        for a in row:
            counts[a.status] = counts.get(a.status, 0) + 1
    click.echo(
        f"review of {len(review.runs)} runs on {', '.join(review.releases)}: "
        + ", ".join(f"{n} {status}" for status, n in counts.items())
    )
    for release, why in missing.items():
        click.echo(f"  {release}: {why}")
    for note in notes:
        click.echo(f"  lifecycle run not run: {note}")
    click.echo(f"GA-3 (5000+ nodes) from: {', '.join(review.scale_sources) or 'no make scale figures'}")
    click.echo("wrote " + ", ".join(str(p) for p in paths.values()))
