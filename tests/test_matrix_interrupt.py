"""An interrupted `dra-conformance matrix` lets the running suite clean up (a real child process and real signals:
the suite is stood in for by a script that takes 1 s to clean up after SIGINT, as the suite removes its cluster)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import signal, sys, time
from pathlib import Path
marker = Path(sys.argv[1])
def stop(*_):
    time.sleep(1.0)  # the suite removing its implementation and cluster
    marker.write_text("cleaned up")
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
Path(sys.argv[2]).write_text("started")
time.sleep(60)
"""

PARENT = """
import sys
from conformance.matrix import _run_to_its_end
with open(sys.argv[3], "w") as log:
    try:
        _run_to_its_end([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[4]], log)
    except KeyboardInterrupt:
        sys.exit(2)
"""


def test_sigterm_to_the_matrix_waits_for_the_suite_to_clean_up(tmp_path: Path) -> None:
    marker, started = tmp_path / "cleaned", tmp_path / "started"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(marker), str(tmp_path / "log"), str(started)])
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline and parent.poll() is None, "the stand-in suite never started"
        time.sleep(0.05)  # polling a file written by a local process, not the cluster
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(30) == 2
    assert marker.exists(), "the matrix ended before the suite it ran had cleaned up (it was killed)"
