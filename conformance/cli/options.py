"""Options more than one command takes: the Kubernetes release (`--k8s-version`, `--release`)."""

from __future__ import annotations

import click

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
    help="Kubernetes version (1.34.x to 1.38.x, pre-releases like 1.38.0-beta.0 too)",
)
