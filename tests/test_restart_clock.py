"""Implementation.ready_since: where a promise about a running implementation starts when the suite restarted part
of it meanwhile (IMP-5 side by side with IMP-8). No processes: the restart spans are set by hand."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

from conformance.implementation.harness import Implementation


def _impl() -> Implementation:
    return Implementation(loaded=cast(Any, None), kubeconfig=Path("k"), workdir=Path("w"))


def test_without_restarts_the_promise_runs_from_the_release() -> None:
    assert _impl().ready_since(100.0) == 100.0


def test_a_restart_over_before_the_release_does_not_move_it() -> None:
    impl = _impl()
    impl.restart_spans.append((90.0, 95.0))
    assert impl.ready_since(100.0) == 100.0


def test_a_restart_after_the_release_moves_it_to_the_restart_end() -> None:
    impl = _impl()
    impl.restart_spans += [(102.0, 110.0), (115.0, 121.0)]
    assert impl.ready_since(100.0) == 121.0
    impl.restart_spans.append((99.0, 101.0))  # began before the release, ready after it: counts too
    assert impl.ready_since(100.0) == 121.0


def test_a_restart_in_progress_counts_from_now() -> None:
    impl = _impl()
    impl.restarting = time.monotonic()
    assert impl.ready_since(0.0) >= impl.restarting
