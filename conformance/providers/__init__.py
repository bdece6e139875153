"""Cluster providers: local (embedded kwokctl binary runtime), kind, existing."""

from __future__ import annotations

from conformance.providers.base import ClusterInfo, ClusterSpec, Provider, ProviderNotReady
from conformance.toolchain.gobuild import Progress

PROVIDERS = ("local", "kind", "existing")


def make_provider(
    name: str, *, download: bool = False, kubeconfig: str | None = None, progress: Progress | None = None
) -> Provider:
    if name == "local":
        from conformance.providers.local import LocalProvider

        return LocalProvider(download=download, **({"progress": progress} if progress else {}))
    if name in ("kind", "existing"):
        from conformance.providers.pending import PendingProvider

        return PendingProvider(name)
    raise ProviderNotReady(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")


__all__ = ["PROVIDERS", "ClusterInfo", "ClusterSpec", "Provider", "ProviderNotReady", "make_provider"]
