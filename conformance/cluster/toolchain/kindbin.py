"""Build kind (sigs.k8s.io/kind) from the Go module proxy into the cache, like the control-plane binaries.

kind is needed by the kind provider (with Docker) and, without Docker, to validate the kind configurations with
kind's own loader and validator (conformance.cluster.kind.validate).
"""

from __future__ import annotations

from pathlib import Path

from conformance.cluster.toolchain.build import _Build, _build, _print
from conformance.cluster.toolchain.cache import Cache, default_cache_root
from conformance.cluster.toolchain.gobuild import Progress
from conformance.cluster.versions import KIND_VERSION


def ensure_kind(cache: Cache | None = None, progress: Progress = _print) -> Path:
    """The cached kind binary of KIND_VERSION, built first if missing."""
    target = (cache or Cache(default_cache_root())).component("kind", KIND_VERSION)
    if not target.has(["kind"]):
        build = _Build(
            name="kind",
            module="sigs.k8s.io/kind",
            version=KIND_VERSION,
            targets={"kind": "sigs.k8s.io/kind"},
            go="1.26",
        )
        _build(build, target, progress)
    return target.binary("kind")
