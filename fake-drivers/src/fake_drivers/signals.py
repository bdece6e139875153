"""Graceful stop on SIGTERM/SIGINT for the long-running components."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType


def stop_event(log: logging.Logger, what: str) -> threading.Event:
    """An event set by SIGTERM or SIGINT, logging `what` the component does on stopping."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: %s", signum, what)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop
