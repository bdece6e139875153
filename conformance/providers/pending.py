"""The kind provider: not built yet (issue 6). It refuses clearly instead of pretending."""

from __future__ import annotations

from conformance.providers.base import ClusterInfo, ClusterSpec, ProviderNotReady

_WHAT = {
    "kind": "a kind cluster from kind-config.yaml through pytest-kind (needs a Docker engine)",
}


class PendingProvider:
    def __init__(self, name: str) -> None:
        self.name = name

    def start(self, spec: ClusterSpec) -> ClusterInfo:
        raise ProviderNotReady(
            f"provider {self.name!r} is not yet implemented ({_WHAT[self.name]}); "
            "use --provider local, the embedded default"
        )

    def stop(self) -> None:
        return None
