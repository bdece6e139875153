"""`kind-config`, `kind image`, `validate-kind-config`: kind cluster configs and images of a release."""

from __future__ import annotations

from pathlib import Path

import click

from conformance.cli.options import _version, version_option
from conformance.cluster.providers.base import KIND_NODES
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import KubeVersion


@click.command("kind-config")
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


@click.group("kind")
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


@click.command("validate-kind-config")
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
