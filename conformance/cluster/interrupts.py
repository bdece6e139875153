"""Interrupts (Ctrl-C, SIGTERM) at any phase: the first one stops the run, and what must always run to its end
(stopping the implementation, deleting the cluster) is shielded from it and from the ones that follow.

The first signal sets CANCELLED (every wait of every thread ends at its next poll) and raises KeyboardInterrupt in
the main thread, unless that thread is inside `shielded()`: teardown then goes on and the run ends right after.
Later signals only say that the run is stopping; the third restores the default action (a way out of a hang).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from conformance.cluster.waits import CANCELLED

SIGNALS = (signal.SIGINT, signal.SIGTERM)
FORCE_AFTER = 3


@dataclass
class _State:
    signal: int | None = None
    at: float | None = None  # time.time() of the first signal
    count: int = 0
    shield: int = 0


_state = _State()


_STDERR: list[int] = []  # a copy of fd 2 taken at install(), before any capture redirected it


def say(message: str) -> None:
    """One line on the terminal the run was started from. Written to the copy of fd 2 taken at install(): pytest
    captures fd 2 inside each test's phases, and the session's fixtures (the implementation's stop, the cluster's
    deletion) are torn down inside the last test's teardown, where a captured line is shown only for a failure."""
    line = f"[dra-conformance] {message}\n".encode()
    with contextlib.suppress(OSError):  # the terminal is gone: nothing to tell
        os.write(_STDERR[0] if _STDERR else sys.__stderr__.fileno(), line)


def interrupted() -> str | None:
    """The name of the first signal that interrupted the run (SIGINT, SIGTERM), or None."""
    return signal.Signals(_state.signal).name if _state.signal is not None else None


def arrived_between(start: float, stop: float) -> bool:
    """Whether the first signal arrived within [start, stop] (time.time() values, as pytest's CallInfo has)."""
    return _state.at is not None and start <= _state.at <= stop


def install(say: Callable[[str], None] = say) -> None:
    """Handle SIGINT and SIGTERM in this process (main thread only; leaves handlers someone else set)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if not _STDERR:
        _STDERR.append(os.dup(sys.__stderr__.fileno()))

    def handler(signum: int, _frame: FrameType | None) -> None:
        CANCELLED.set()
        _state.count += 1
        name = signal.Signals(signum).name
        if _state.signal is None:
            _state.signal, _state.at = signum, time.time()
        elif _state.count >= FORCE_AFTER:
            say(f"{name} again: giving up on a clean stop")
            for sig in SIGNALS:
                signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)
            raise KeyboardInterrupt(name)
        else:
            say(f"{name}: already stopping (processes and cluster are being removed); once more to force")
            return
        if _state.shield:
            say(f"{name}: stopping as soon as the clean-up under way is done")
            return
        raise KeyboardInterrupt(name)

    for sig in SIGNALS:
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler, None):
            signal.signal(sig, handler)


@contextmanager
def shielded() -> Iterator[None]:
    """Run a clean-up to its end even when a signal arrives meanwhile (its waits still see CANCELLED)."""
    _state.shield += 1
    try:
        yield
    finally:
        _state.shield -= 1


def shield_from_now_on() -> None:
    """Everything left is teardown (the end of a session): no later signal may cut it short."""
    _state.shield += 1


def reset() -> None:
    """Forget an interrupt (tests of this module; a new run in the same process)."""
    _state.signal, _state.at, _state.count, _state.shield = None, None, 0, 0
    CANCELLED.clear()
