"""Cluster providers: local (embedded kwokctl binary runtime), kind, existing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.cluster.providers.base import ClusterInfo, ClusterSpec, Provider, ProviderNotReady
from conformance.cluster.toolchain.gobuild import Progress

PROVIDERS = ("local", "kind", "existing")


def make_provider(
    name: str,
    *,
    download: bool = False,
    kubeconfig: str | None = None,
    allow_unmarked: bool = False,
    progress: Progress | None = None,
    option: Callable[[str], Any] | None = None,
) -> Provider:
    """The provider called `name`; `option` reads pytest options (the kind provider takes pytest-kind's)."""
    say = {"progress": progress} if progress else {}
    if name == "local":
        from conformance.cluster.providers.local import LocalProvider

        return LocalProvider(download=download, **say)
    if name == "existing":
        from conformance.cluster.providers.existing import ExistingProvider

        url = option("--scheduler-url") if option else None
        return ExistingProvider(kubeconfig, allow_unmarked=allow_unmarked, scheduler_url=url, **say)
    if name == "kind":
        from conformance.cluster.providers.kind import KindProvider

        return KindProvider.from_options(option or (lambda _name: None), **say)
    raise ProviderNotReady(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")


__all__ = ["PROVIDERS", "ClusterInfo", "ClusterSpec", "Provider", "ProviderNotReady", "make_provider"]
