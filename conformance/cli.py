"""`dra-conformance`: build the binaries, run a local cluster by hand, measure it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from conformance.cluster.providers.base import KIND_NODES, LOCAL_NODES, ClusterSpec, ProviderNotReady, default_nodes
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import DEFAULT_VERSION, KubeVersion, UnsupportedVersion, parse_version
from conformance.report.verdict import EXIT_PARTIAL

if TYPE_CHECKING:
    from conformance.implementation.profile import Profile


def _version(ctx: click.Context, param: click.Parameter, value: str) -> KubeVersion:
    try:
        return parse_version(value)
    except UnsupportedVersion as exc:
        raise click.BadParameter(str(exc)) from None


version_option = click.option(
    "--k8s-version",
    "version",
    default=DEFAULT_VERSION,
    show_default=True,
    callback=_version,
    help="Kubernetes version (1.34.x to 1.38.x, pre-releases like 1.38.0-beta.0 too)",
)


@click.group()
def main() -> None:
    """KEP-5007 device binding conditions: conformance suite tooling."""


@main.command()
@version_option
def build(version: KubeVersion) -> None:
    """Build (once) and cache kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok."""
    try:
        binaries = ensure_binaries(version)
    except BuildError as exc:
        raise click.ClickException(str(exc)) from None
    for name, path in {
        **binaries.kube,
        "etcd": binaries.etcd,
        "kwok": binaries.kwok,
        "kwokctl": binaries.kwokctl,
    }.items():
        click.echo(f"{name:24} {path}")


@main.group()
def cluster() -> None:
    """Start and stop local clusters by hand (the test run does this itself)."""


@cluster.command("up")
@version_option
@click.option("--nodes", default=LOCAL_NODES, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--binding-timeout",
    default=20,
    show_default=True,
    type=click.IntRange(min=1),
    help="scheduler bindingTimeout in seconds (1.35+)",
)
@click.option("--name", default=None, help="cluster name (default: random)")
def cluster_up(version: KubeVersion, nodes: int, binding_timeout: int, name: str | None) -> None:
    """Start a local cluster and leave it running; prints its kubeconfig path."""
    from conformance.cluster.providers.local import LocalProvider

    provider = LocalProvider()
    spec = ClusterSpec(
        version=version, nodes=default_nodes(nodes), binding_timeout_s=binding_timeout, keep=True, name=name
    )
    try:
        info = provider.start(spec)
    except (ProviderNotReady, BuildError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"export KUBECONFIG={info.kubeconfig}")
    click.echo(f"# remove with: dra-conformance cluster down {info.name}", err=True)


@cluster.command("down")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="remove every local cluster of this user")
def cluster_down(names: tuple[str, ...], everything: bool) -> None:
    """Stop local clusters and remove their files."""
    from conformance.cluster.providers.local import clusters_root, delete_cluster, kwokctl_of

    root = clusters_root()
    targets = sorted(p.name for p in root.iterdir()) if everything and root.exists() else list(names)
    if not targets:
        raise click.UsageError("name a cluster or pass --all")
    for name in targets:
        workdir = root / name
        if not workdir.exists():
            click.echo(f"no local cluster {name!r} under {root}", err=True)
            sys.exit(1)
        delete_cluster(name, workdir, kwokctl_of(workdir))
        click.echo(f"removed {name}")


@cluster.command("list")
def cluster_list() -> None:
    """List local clusters and their kubeconfig files."""
    from conformance.cluster.providers.local import clusters_root

    root = clusters_root()
    for workdir in sorted(root.iterdir()) if root.exists() else []:
        click.echo(f"{workdir.name:20} {workdir / 'kubeconfig'}")


@main.command()
@version_option
@click.option("--runs", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--nodes", default=LOCAL_NODES, show_default=True, type=click.IntRange(min=1))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="also write the figures as JSON")
@click.option(
    "--history",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="keep the figures in this folder and print what got slower since the previous bench",
)
def bench(version: KubeVersion, runs: int, nodes: int, out: Path | None, history: Path | None) -> None:
    """Measure local cluster bring-up (to all nodes Ready, by phase), teardown, control-plane memory and CPU."""
    from conformance.cluster.bench import bench_local_cluster
    from conformance.cluster.bench_history import cluster_figures, compare_and_record

    figures = bench_local_cluster(version, runs=runs, nodes=nodes, out=out)
    if history is not None:
        for line in compare_and_record(history, "cluster", cluster_figures(figures)):
            click.echo(line)


@main.command("kind-config")
@version_option
@click.option("--out", type=click.Path(path_type=Path), default=Path("kind-config.yaml"), show_default=True)
@click.option(
    "--scheduler-config",
    type=click.Path(path_type=Path),
    default=Path("fixtures/kind/scheduler-config.yaml"),
    show_default=True,
    help="where to write the KubeSchedulerConfiguration the control plane mounts (referenced as given)",
)
@click.option("--workers", default=KIND_NODES, show_default=True, type=click.IntRange(min=2))
@click.option("--binding-timeout", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--image", default=None, help="kind node image (default: kind's own image for the release)")
def kind_config(
    version: KubeVersion, out: Path, scheduler_config: Path, workers: int, binding_timeout: int, image: str | None
) -> None:
    """Write the kind cluster config for a release (feature gates, runtime-config, bindingTimeout, CDI, nodes)."""
    from conformance.cluster.kind.config import KindConfigError, write_kind_files

    try:
        write_kind_files(out, scheduler_config, version, binding_timeout, workers=workers, image=image)
    except KindConfigError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {out} and {scheduler_config}")


@main.group("kind")
def kind_group() -> None:
    """kind images built here, with no container registry."""


@kind_group.command("image")
@version_option
@click.option(
    "--node",
    type=click.Choice(["auto", "build", "skip"]),
    default="auto",
    show_default=True,
    help="the kind node image: auto builds it only where kind's own kindest/node cannot be had (no registry)",
)
@click.option(
    "--reference/--no-reference", default=True, show_default=True, help="the reference implementation's image"
)
def kind_image(version: KubeVersion, node: str, reference: bool) -> None:
    """Build the kind node image of a release and the reference image (cached by inputs; a Docker engine is
    started for the build where none runs, and stopped after)."""
    from conformance.cluster.kind.images import build_images

    def progress(message: str) -> None:
        click.echo(message, err=True)

    try:
        built = build_images(version, node=node, reference=reference, progress=progress)
    except (BuildError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    for image, state in built.images.items():
        click.echo(f"{image}: {state}")
    click.echo("seconds: " + ", ".join(f"{k} {v:g}" for k, v in built.seconds.items()))


@main.command("validate-kind-config")
@click.argument("configs", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--release",
    "releases",
    multiple=True,
    callback=lambda ctx, param, values: [_version(ctx, param, v) for v in values],
    help="also generate and check the config of this release (repeatable); where kind has no node image for it, "
    "the image is named kindest/node:v<version> (never pulled: the check stops before)",
)
def validate_kind_config(configs: tuple[Path, ...], releases: list[KubeVersion]) -> None:
    """Check kind configs with kind's own loader and validator (no Docker engine needed)."""
    import tempfile

    from conformance.cluster.kind.config import NODE_IMAGES, write_kind_files
    from conformance.cluster.kind.validate import check_kind_config
    from conformance.cluster.toolchain.kindbin import ensure_kind

    if not configs and not releases:
        raise click.UsageError("name kind configs to check, or --release VERSION")
    try:
        kind = ensure_kind()
    except BuildError as exc:
        raise click.ClickException(str(exc)) from None
    failed = []
    with tempfile.TemporaryDirectory(prefix="kind-configs-") as tmp:
        generated = []
        for version in releases:
            image = None if (version.major, version.minor) in NODE_IMAGES else f"kindest/node:v{version}"
            folder = Path(tmp) / str(version)
            config = folder / "kind-config.yaml"
            write_kind_files(config, folder / "scheduler-config.yaml", version, 20, image=image)
            generated.append(config)
        for config in [*configs, *generated]:
            verdict = check_kind_config(kind, config)
            click.echo(f"{config}: {'ok' if verdict.ok else 'REJECTED'}: {verdict.detail}")
            if not verdict.ok:
                failed.append(str(config))
    if failed:
        raise click.ClickException(f"kind rejected {', '.join(failed)}")


@main.command("matrix")
@click.option(
    "--release",
    "releases",
    multiple=True,
    callback=lambda ctx, param, values: [_version(ctx, param, v) for v in values],
    help="a release to run (repeatable); default: the newest known version of every supported minor",
)
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


@main.command("figures")
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


@main.command("soak")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
def soak_command(folder: Path) -> None:
    """Summarise a soak (`make soak`): per test how often it failed, and the spread of every figure."""
    from conformance.report.soak import report

    raise SystemExit(report(folder))


@main.group()
def profile() -> None:
    """Write, validate and explain implementation profiles (docs/certify.md)."""


@profile.command("init")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="file to write (default: stdout)"
)
@click.option("--force", is_flag=True, help="overwrite --out if it exists")
@click.option("--full", is_flag=True, help="every field of the schema, commented (hooks, roles, perNode, tls...)")
def profile_init(out: Path | None, force: bool, full: bool) -> None:
    """A commented starting profile, valid as it is; edit it, then `profile check` it."""
    from conformance.implementation.profile import FULL_TEMPLATE_FILE, TEMPLATE_FILE

    text = (FULL_TEMPLATE_FILE if full else TEMPLATE_FILE).read_text()
    if out is None:
        click.echo(text, nl=False)
        return
    if out.exists() and not force:
        raise click.ClickException(f"{out} exists; pass --force to overwrite it")
    out.write_text(text)
    click.echo(f"wrote {out}; next: dra-conformance profile check {out}", err=True)


@profile.command("schema")
def profile_schema() -> None:
    """Print the profile's JSON Schema (the published file is conformance/implementation/profile.schema.json)."""
    import json

    from conformance.implementation.profile import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


def _probe_check(prof: Profile, url: str, ca_file: str | None, kubeconfig: Path | None) -> list[str]:
    """The probe's answer against the profile (and the cluster's pools): errors; notes are printed."""
    from kubernetes import client, config

    from conformance.suite.probecheck import probe_problems, read_probe

    try:
        body = read_probe(url, ca_file)
    except (OSError, ValueError) as exc:
        return [f"--probe-url {url}: no answer: {exc}"]
    slices = None
    if kubeconfig is not None:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        objects = client.CustomObjectsApi(api)
        slices = objects.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    errors, notes = probe_problems(prof, body, slices)
    for note in notes:
        click.echo(f"  probe: {note}")
    return [f"probe {url}: {e}" for e in errors]


@profile.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--probe-url", default=None, help="a running fabric probe: check its answer (and the model rule)")
@click.option("--probe-ca-file", default=None, type=click.Path(exists=True, dir_okay=False), help="its CA (https)")
@click.option(
    "--kubeconfig",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --probe-url: a cluster where the stack publishes, to compare the pools' modelAttribute values",
)
def profile_check(file: Path, probe_url: str | None, probe_ca_file: str | None, kubeconfig: Path | None) -> None:
    """Validate FILE, check its placeholders and files, and say what each requirement will do with it.

    Exit status: 0 usable, 1 problems found (listed), 2 bad usage.
    """
    from conformance.implementation.profile import ProfileError, load_profile
    from conformance.suite.profilecheck import check

    try:
        loaded = load_profile(file)
    except ProfileError as exc:
        raise click.ClickException(str(exc)) from None
    result = check(loaded)
    if probe_url:
        result.errors += _probe_check(loaded.profile, probe_url, probe_ca_file, kubeconfig)
    prof = loaded.profile
    click.echo(f"profile {prof.name} {prof.version} ({loaded.path})")
    entries = f", fabric entries {prof.fabric_entries}" if prof.has_fabric else " (no fabric)"
    click.echo(f"  driver {prof.driver}, {prof.binding_model}{entries}")
    click.echo(
        f"  bindingTimeout of a cluster the suite starts: {prof.binding_timeout_s()}s (--binding-timeout overrides)"
    )
    for warning in result.warnings:
        click.echo(f"  warning: {warning}")
    for error in result.errors:
        click.echo(f"  error: {error}", err=True)
    click.echo("requirements with this profile:")
    for row in result.plan:
        click.echo(f"  {row.requirement:8} {row.level:6} {row.action:14} {row.reason}")
    runs = sum(r.action == "run" for r in result.plan)
    apart = sum(r.action == "not-applicable" for r in result.plan)
    if apart:
        click.echo(
            f"{apart} requirements are not applicable to bindingModel {prof.binding_model}: not run, counted out of "
            f"the verdict (it says so: e.g. success ({apart} requirements not applicable to bindingModel "
            f"{prof.binding_model}))"
        )
    click.echo(
        f"{runs} of {len(result.plan)} requirements will run; a run may still skip one for what only the cluster "
        "shows (its release, a node it cannot add) and says why then; what the implementation owes (devices, reach) "
        "is never skipped: missing after promises.publishSeconds it fails; what each one checks, per design: the "
        "requirement reference (`make docs`, site/reference/requirements.html)"
    )
    if result.errors:
        raise click.ClickException(f"{len(result.errors)} problem(s) in {file}")


@main.group()
def implementation() -> None:
    """Run a profile's implementation outside the suite (docs/certify.md "Already running")."""


@implementation.command("up")
@click.option("--profile", "profile_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kubeconfig", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--state",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for env (to source), NAME.pid and NAME.log",
)
def implementation_up(profile_path: Path, kubeconfig: Path, state: Path) -> None:
    """Start the profile's implementation against a cluster and keep it running in the foreground, supervised:
    a process that exits is started again. SIGINT/SIGTERM stop everything cleanly. Exit status 1 if it could
    not start or did not stop cleanly."""
    import datetime

    from conformance.implementation.harness import Implementation, ImplementationFailed
    from conformance.implementation.profile import ProfileError, load_profile
    from conformance.implementation.supervise import Supervisor

    def say(message: str) -> None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
        click.echo(f"{stamp} [implementation] {message}", err=True)

    try:
        loaded = load_profile(profile_path)
    except ProfileError as exc:
        raise click.ClickException(str(exc)) from None
    if not loaded.profile.processes:
        raise click.ClickException(f"{profile_path} starts no processes: nothing to supervise")
    state.mkdir(parents=True, exist_ok=True)
    impl = Implementation(loaded, kubeconfig.resolve(), state.resolve(), progress=say)
    try:
        problems = Supervisor(impl, say).run()
    except (ImplementationFailed, ProfileError) as exc:
        raise click.ClickException(f"cannot start the implementation of {profile_path}: {exc}") from None
    if problems:
        raise click.ClickException("did not stop cleanly:\n" + "\n".join(problems))
    say("stopped cleanly")


@implementation.command("restart")
@click.option("--state", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(min=1))
@click.argument("name")
def implementation_restart(state: Path, timeout: float, name: str) -> None:
    """Kill process NAME of `implementation up --state STATE` (SIGKILL, a crash) and wait until the supervisor has
    it ready again: a restart command for a profile's `roles`."""
    from conformance.cluster.waits import WaitTimeout
    from conformance.implementation.harness import ImplementationFailed
    from conformance.implementation.supervise import restart_process

    try:
        old, new = restart_process(state, name, timeout)
    except (ImplementationFailed, WaitTimeout) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{name}: killed pid {old}; running again as pid {new}")


_results = click.argument("source", type=click.Path(exists=True, path_type=Path))


@main.command("report")
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


@main.command("check-html")
@click.argument("page", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--screenshot", type=click.Path(path_type=Path), default=None)
def check_html(page: Path, screenshot: Path | None) -> None:
    """Render an HTML report in headless chromium, keep a screenshot, and check that every link resolves."""
    _check_html(page, screenshot or page.with_suffix(".png"))


@main.command("bundle")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="default: <folder>/results.tar.gz")
def bundle_command(folder: Path, out: Path | None) -> None:
    """Pack a reports folder into a results bundle (tar.gz) with a SHA-256 manifest of every file."""
    from conformance.report.bundle import make_bundle

    click.echo(f"wrote {make_bundle(folder, out)}")


@main.command("compare")
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


if __name__ == "__main__":
    main()
