"""`build`, `cluster up/down/list`, `bench`: the local control plane by hand (binaries, clusters, bring-up figures)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from conformance.cli.options import version_option
from conformance.cluster.providers.base import LOCAL_NODES, ClusterSpec, ProviderNotReady, default_nodes
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import KubeVersion


@click.command()
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


@click.group()
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


@click.command()
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
