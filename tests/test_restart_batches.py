"""IMP-8 stages its four steps for one restart where it can: how many fit side by side (conformance/suite/
implementation/test_restart.py `_batches`).

The scenario context is a stand-in (a fake, said so here): only what `_batches` reads — the fabric-only nodes, the
pool's fabric count, whether entries are count-based, the profile's fabricConcurrency.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.suite.implementation.test_restart import STEPS, _batches


def _ctx(nodes: list[str], fabric: int, *, counted: bool = False, concurrency: int | None = None) -> object:
    pool = SimpleNamespace(count=lambda kind, node=None: fabric)
    return SimpleNamespace(
        remote_nodes=lambda: nodes,
        counted=counted,
        pool=pool,
        profile=SimpleNamespace(fabric_concurrency=concurrency),
    )


@pytest.mark.parametrize(
    ("ctx", "sizes", "why"),
    [
        (_ctx(["node-2"], 8), [4], "identified devices: every step on one node, a device each"),
        (_ctx(["node-2"], 2), [2, 2], "two devices reach the node: two steps per restart"),
        (_ctx(["node-2", "node-3"], 8, counted=True), [2, 2], "count-based: a node each, two nodes"),
        (_ctx([f"node-{i}" for i in range(2, 8)], 8, counted=True), [4], "count-based, 6 fabric-only nodes"),
        (_ctx([f"node-{i}" for i in range(2, 8)], 3, counted=True), [3, 1], "count-based, capacity 3"),
        (_ctx(["node-2"], 8, concurrency=1), [1, 1, 1, 1], "fabricConcurrency 1: one held operation at a time"),
        (_ctx(["node-2"], 8, concurrency=3), [3, 1], "fabricConcurrency 3"),
    ],
)
def test_steps_go_in_batches_that_fit(ctx: object, sizes: list[int], why: str) -> None:
    batches = _batches(ctx)  # type: ignore[arg-type]
    assert [len(b) for b in batches] == sizes, why
    assert tuple(s for b in batches for s in b) == STEPS, "every step once, in order"
