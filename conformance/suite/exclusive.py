"""Scenarios that disturb the shared implementation run alone.

A scenario that restarts parts of the implementation (IMP-8) changes what every other scenario running beside it
sees: a restarted controller may retry an attach whose outcome it lost, or start a detach's idle grace again. No
other scenario's verdict may depend on how the implementation copes with a disturbance it did not cause, so such
scenarios (`exclusive=True`) run one at a time with no other implementation scenario beside them — first, so that
the cluster scenarios (their own runner) overlap them — and the others run side by side afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from conformance.cluster.waits import CANCELLED, Cancelled

_TICK_S = 0.5  # how often a waiting scenario looks at the run's cancellation


class ExclusiveGate:
    def __init__(self, exclusive: int) -> None:
        self._cond = threading.Condition()
        self._pending = exclusive  # exclusive scenarios not yet finished: shared ones wait for all of them
        self._shared = 0
        self._alone = False

    def _wait(self, ready: object) -> None:
        while not self._cond.wait_for(ready, timeout=_TICK_S):  # type: ignore[arg-type]
            if CANCELLED.is_set():
                raise Cancelled("the run was interrupted while the scenario waited for its turn")

    @contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._wait(lambda: self._shared == 0 and not self._alone)
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._pending -= 1
                self._cond.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._wait(lambda: self._pending <= 0 and not self._alone)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()
