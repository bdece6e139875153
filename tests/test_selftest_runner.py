"""The selftests' suite runner never leaves its suite subprocess (and so its cluster) behind: SIGTERM is passed on and
a timeout stops the child with SIGTERM so that its own teardown runs. The child here is a stand-in Python process that
records the signal it got (no cluster: this is about process plumbing only)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from selftest import suite_runner

CHILD = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write(signal.Signals(signum).name)  # the suite's teardown would run here
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + ".started", "w").close()
time.sleep(60)
"""


def _wait_for(path: Path, deadline_s: float = 20) -> None:
    end = time.monotonic() + deadline_s
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)


def test_a_timeout_stops_the_child_with_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "got"
    proc = suite_runner.run_forwarding([sys.executable, "-c", CHILD, str(marker)], timeout=2)
    assert marker.read_text() == "SIGTERM"  # not SIGKILL: the child's teardown ran
    assert proc.returncode == 143
    assert "stopped with SIGTERM" in proc.stderr


def test_sigterm_to_the_runner_reaches_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "got"
    started = Path(str(marker) + ".started")

    def send() -> None:
        _wait_for(started)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    sender = threading.Thread(target=send)
    sender.start()
    with pytest.raises(KeyboardInterrupt, match="SIGTERM forwarded"):
        suite_runner.run_forwarding([sys.executable, "-c", CHILD, str(marker)], timeout=60)
    sender.join()
    assert marker.read_text() == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == before  # the runner's forwarding handler is gone again
