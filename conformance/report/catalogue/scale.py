"""SCALE requirements: many pods waiting in PreBind all bind, none lost."""

from __future__ import annotations

from conformance.report.catalogue.model import _NO_NODE, Applies, Doc, Requirement, _r

REQUIREMENTS: tuple[Requirement, ...] = (
    _r("SCALE-1", "scale", "SHOULD", "many pods waiting in PreBind all bind, none lost", "Test Plan / e2e"),
)

APPLIES: dict[str, Applies] = {}  # every binding model

DOCS: dict[str, Doc] = {
    "SCALE-1": Doc(
        "scale: `--scale-pods` pods (default 16; the KEP's 1000 with `--scale-pods 1000`) with the implementation's "
        "devices with binding conditions (fabric devices; for a node-local readiness gate its node-local ones, the "
        "latency measured as `ready_to_bind_seconds`) wait in PreBind and all bind, none lost; then as many with "
        "suite-owned node-local devices without conditions, for the throughput ratio; its note quotes the time in "
        "PreBind (p50, p99), pods bound per second with and without conditions and their ratio. The KEP's GA size "
        "(1000 pods in PreBind on 100 / 1000 / 5000 nodes) is `make scale`'s, a benchmark beside the suite "
        "(docs/performance.md, Scalability)",
        skips="needs as many devices with binding conditions as pods; " + _NO_NODE,
    ),
}
