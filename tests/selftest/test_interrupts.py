"""An interrupted run (SIGTERM, Ctrl-C) ends within seconds at any phase, says so in one line, writes the reports of
what ran, and leaves no process, no cluster folder and no listening port behind.

Each case runs the suite as a real pytest subprocess against the reference profile and signals it when its output
shows the phase. The build phase uses a stand-in `go` (an empty binary cache would otherwise start a real, cold
build): what is checked is that the builder's go processes, and what they started, are stopped.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from conformance.cluster.providers.local import PORT_OPTIONS, clusters_root, leftover_processes
from selftest.suite_runner import ROOT, suite_argv

END_WITHIN_S = 20.0  # measured under load (2 cores shared with other runs); idle it is a few seconds
PHASE_DEADLINE_S = 300.0
QUICK = "conformance/suite/implementation/test_privilege.py"  # one short scenario (least privilege)
LONG = "conformance/suite/implementation/test_restart.py"  # a scenario that restarts the controller (~30 s)

FAKE_GO = """#!/bin/bash
if [ "$1 $2" = "env GOVERSION" ]; then echo go1.26.8; exit 0; fi
touch "{started}"
sleep {marker} &
wait
"""


class Run:
    """The suite in a subprocess; its output is followed line by line, and what it started is noted meanwhile."""

    def __init__(self, tmp_path: Path, target: str, env: dict[str, str] | None = None) -> None:
        self.basetemp = tmp_path / "basetemp"
        self.reports = tmp_path / "reports"
        self.lines: list[str] = []
        self.cluster: str | None = None
        self.ports: set[int] = set()
        self.proc = subprocess.Popen(
            suite_argv(target, "-q", f"--basetemp={self.basetemp}", f"--reports-dir={self.reports}"),
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._seen = threading.Condition()
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._seen:
                self.lines.append(line.rstrip("\n"))
                if match := re.search(r"starting local cluster (\S+)", line):
                    self.cluster = match[1]
                self._note_ports()
                self._seen.notify_all()
        with self._seen:
            self._seen.notify_all()

    def _note_ports(self) -> None:
        """Ports of the cluster (from its kwokctl config) and of the implementation (its port files)."""
        if self.cluster:
            config = clusters_root() / self.cluster / "kwokctl.yaml"
            if config.exists():
                options = (yaml.safe_load(config.read_text()) or {}).get("options", {})
                self.ports |= {int(options[k]) for k in PORT_OPTIONS if k in options}
        for port_file in self.basetemp.glob("**/*.port"):
            text = port_file.read_text().strip()
            if text.isdigit():
                self.ports.add(int(text))

    def wait_for_line(self, pattern: str) -> str:
        deadline = time.monotonic() + PHASE_DEADLINE_S
        with self._seen:
            while True:
                for line in self.lines:
                    if re.search(pattern, line):
                        return line
                assert self.proc.poll() is None or self._reader.is_alive(), (
                    f"the run ended before a line matching {pattern!r}:\n" + "\n".join(self.lines[-40:])
                )
                left = deadline - time.monotonic()
                assert left > 0, f"no line matching {pattern!r} within {PHASE_DEADLINE_S:g}s:\n" + "\n".join(
                    self.lines[-40:]
                )
                self._seen.wait(min(left, 1.0))

    def interrupt(self, sig: int = signal.SIGTERM) -> float:
        """Signal the run; return the seconds until it ended."""
        with self._seen:
            self._note_ports()
        sent = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(END_WITHIN_S * 3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still running {END_WITHIN_S * 3:g}s after {sig!r}:\n" + "\n".join(self.lines[-40:]))
        self._reader.join(10)
        return time.monotonic() - sent

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def assert_clean_end(run: Run, seconds: float, signal_name: str, *, in_report: bool = True) -> None:
    output = run.output
    assert seconds <= END_WITHIN_S, f"took {seconds:.1f}s to end after {signal_name}:\n{output[-3000:]}"
    assert "Traceback" not in output and "Cancelled" not in output, output[-6000:]
    assert f"interrupted ({signal_name})" in output or f"{signal_name}: stopping as soon as" in output, output[-3000:]
    left = leftover_processes(str(run.basetemp))
    if run.cluster:
        left += leftover_processes(str(clusters_root() / run.cluster))
        assert not (clusters_root() / run.cluster).exists(), f"cluster folder {run.cluster} left behind"
    assert not left, f"processes left running: {left}"
    busy = [port for port in sorted(run.ports) if not _free(port)]
    assert not busy, f"ports still in use after the run: {busy}"
    report = run.reports / "conformance-report.yaml"
    assert report.exists(), f"no report of what ran:\n{output[-3000:]}"
    if in_report:  # a signal during the final teardown comes after a complete run and its report
        assert f"interrupted: {signal_name}" in report.read_text()


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of closed connections is not use
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_interrupt_during_the_build_stops_the_go_processes(tmp_path: Path) -> None:
    started, marker = tmp_path / "go-started", f"3{os.getpid() % 1000}.{time.time_ns() % 10**6}"
    fake = tmp_path / "bin" / "go"
    fake.parent.mkdir()
    fake.write_text(FAKE_GO.format(started=started, marker=marker))
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "DRA_CONFORMANCE_CACHE": str(tmp_path / "cache")}
    run = Run(tmp_path, QUICK, env)
    deadline = time.monotonic() + PHASE_DEADLINE_S
    while not started.exists():
        assert run.proc.poll() is None, run.output[-3000:]
        assert time.monotonic() < deadline, "the builder never ran go"
        time.sleep(0.1)
    seconds = run.interrupt()
    assert_clean_end(run, seconds, "SIGTERM")
    assert not leftover_processes(f"sleep {marker}"), "the build's go processes were left running"


@pytest.mark.parametrize(
    ("phase", "target", "pattern", "sig"),
    [
        ("bring-up", QUICK, r"starting local cluster", signal.SIGTERM),
        ("implementation start", QUICK, r"started fabric-manager", signal.SIGTERM),
        ("scenarios", LONG, r"starting \d+ scenarios side by side", signal.SIGINT),
        ("teardown", QUICK, r"stopped (controller|node-driver|fabric-manager)", signal.SIGTERM),
    ],
)
def test_interrupt_at_each_phase_leaves_nothing(
    tmp_path: Path, phase: str, target: str, pattern: str, sig: int
) -> None:
    run = Run(tmp_path, target)
    run.wait_for_line(pattern)
    if phase == "scenarios":
        run.wait_for_line(r"killed controller")  # in the middle of the controller's restart
    seconds = run.interrupt(sig)
    print(f"{phase}: ended {seconds:.1f}s after {signal.Signals(sig).name}")
    assert_clean_end(run, seconds, signal.Signals(sig).name, in_report=phase != "teardown")


def test_a_second_signal_does_not_break_the_teardown(tmp_path: Path) -> None:
    run = Run(tmp_path, QUICK)
    run.wait_for_line(r"started node-driver")
    run.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # the second signal lands while the first one's teardown runs
    seconds = run.interrupt(signal.SIGTERM)
    assert_clean_end(run, seconds, "SIGTERM")
