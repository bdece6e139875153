"""Cluster providers: local (embedded kwokctl binary runtime), kind, existing."""

from __future__ import annotations

from conformance.providers.base import ClusterInfo, ClusterSpec, Provider, ProviderNotReady
from conformance.toolchain.gobuild import Progress

PROVIDERS = ("local", "kind", "existing")


def make_provider(
    name: str,
    *,
    download: bool = False,
    kubeconfig: str | None = None,
    allow_unmarked: bool = False,
    progress: Progress | None = None,
) -> Provider:
    say = {"progress": progress} if progress else {}
    if name == "local":
        from conformance.providers.local import LocalProvider

        return LocalProvider(download=download, **say)
    if name == "existing":
        from conformance.providers.existing import ExistingProvider

        return ExistingProvider(kubeconfig, allow_unmarked=allow_unmarked, **say)
    if name == "kind":
        from conformance.providers.pending import PendingProvider

        return PendingProvider(name)
    raise ProviderNotReady(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")


__all__ = ["PROVIDERS", "ClusterInfo", "ClusterSpec", "Provider", "ProviderNotReady", "make_provider"]
