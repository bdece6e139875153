"""Options more than one command takes: the Kubernetes release (`--k8s-version`, `--release`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from conformance.cluster.versions import DEFAULT_VERSION, KubeVersion, UnsupportedVersion, parse_version

F = TypeVar("F", bound=Callable[..., Any])


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


def releases_option(help_text: str) -> Callable[[F], F]:
    """`--release` (repeatable): the releases a command runs the suite on (`matrix`, `review --run`)."""
    return click.option(
        "--release",
        "releases",
        multiple=True,
        callback=lambda ctx, param, values: [_version(ctx, param, v) for v in values],
        help=help_text,
    )
