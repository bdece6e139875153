"""`dra-conformance`: build the binaries, run a local cluster by hand, measure it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from conformance.cluster.providers.base import ClusterSpec, ProviderNotReady, default_nodes
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import DEFAULT_VERSION, KubeVersion, UnsupportedVersion, parse_version


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
    help="Kubernetes version (1.34.x to 1.37.x)",
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
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(min=1))
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
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="also write the figures as JSON")
def bench(version: KubeVersion, runs: int, nodes: int, out: Path | None) -> None:
    """Measure local cluster bring-up (to all nodes Ready), teardown and control-plane memory."""
    from conformance.cluster.bench import bench_local_cluster

    bench_local_cluster(version, runs=runs, nodes=nodes, out=out)


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
@click.option("--workers", default=4, show_default=True, type=click.IntRange(min=2))
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


@main.command("figures")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def figures_command(report: Path) -> None:
    """Print the benchmark figures of a suite run from its conformance-report.yaml."""
    from conformance.report.figures import print_figures

    print_figures(report)


@main.group()
def profile() -> None:
    """Write, validate and explain implementation profiles (README "Certify your stack")."""


@profile.command("init")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="file to write (default: stdout)"
)
@click.option("--force", is_flag=True, help="overwrite --out if it exists")
def profile_init(out: Path | None, force: bool) -> None:
    """A commented starting profile, valid as it is; edit it, then `profile check` it."""
    from conformance.implementation.profile import TEMPLATE_FILE

    text = TEMPLATE_FILE.read_text()
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


@profile.command("check")
@click.argument("file", type=click.Path(path_type=Path))
def profile_check(file: Path) -> None:
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
    prof = loaded.profile
    click.echo(f"profile {prof.name} {prof.version} ({loaded.path})")
    click.echo(f"  driver {prof.driver}, {prof.binding_model}, fabric entries {prof.fabric_entries}")
    for warning in result.warnings:
        click.echo(f"  warning: {warning}")
    for error in result.errors:
        click.echo(f"  error: {error}", err=True)
    click.echo("requirements with this profile:")
    for row in result.plan:
        click.echo(f"  {row.requirement:8} {row.level:6} {row.action:11} {row.reason}")
    runs = sum(r.action == "run" for r in result.plan)
    click.echo(
        f"{runs} of {len(result.plan)} requirements will run; a run may still skip one for what only the cluster "
        "shows (its release, the devices actually published) and says why then"
    )
    if result.errors:
        raise click.ClickException(f"{len(result.errors)} problem(s) in {file}")


@main.group()
def implementation() -> None:
    """Run a profile's implementation outside the suite (README "Certify an implementation that already runs")."""


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


if __name__ == "__main__":
    main()
