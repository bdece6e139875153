"""The local cluster's control-plane watch (cluster/providers/local/watchdog.py) on stand-in processes (`sleep`, no
cluster): a component that exited is recorded with the cause its log gives and started again; a component restarted
on purpose is not; one that keeps dying is left down. The cause is read from a real kube-scheduler 1.37.2 panic."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster.crashlog import crash_cause
from conformance.cluster.providers.base import Crash
from conformance.cluster.providers.local.watchdog import MAX_RESTARTS, Watchdog
from conformance.suite.cluster.test_control_plane_up import explained_by_tracker_panic

PANIC_LOG = Path(__file__).parent / "data" / "kube-scheduler-tracker-panic.log"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "pids").mkdir()
    (tmp_path / "logs").mkdir()
    yield tmp_path


class StandIn:
    """Plays the components: `start` runs a long `sleep` under the component's pid file."""

    def __init__(self, state: Path) -> None:
        self.state, self.procs, self.restarts = state, [], []

    def start(self, name: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sleep", "60"])
        self.procs.append(proc)
        (self.state / "pids" / f"{name}.pid").write_text(str(proc.pid))
        return proc

    def restart(self, name: str, why: str) -> None:
        self.restarts.append((name, why))
        self.start(name)

    def crash(self, name: str) -> None:
        proc = next(p for p in reversed(self.procs) if str(p.pid) == (self.state / "pids" / f"{name}.pid").read_text())
        proc.kill()
        proc.wait()

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def _watch(state: Path, stand_in: StandIn) -> Watchdog:
    said: list[str] = []
    return Watchdog(state, stand_in.restart, said.append, components=("kube-scheduler", "kube-apiserver"))


def test_the_cause_is_the_panic_and_the_frame_it_panicked_in() -> None:
    cause, frame = crash_cause(PANIC_LOG.read_text())
    assert cause == "panic: runtime error: index out of range [38] with length 38 [recovered, repanicked]"
    assert frame == "k8s.io/dynamic-resource-allocation/resourceslice/tracker.(*Tracker).syncSlice (tracker.go:551)"
    crash = Crash("kube-scheduler", 0.0, cause, frame, "kube-scheduler.log", restarted=True)
    assert explained_by_tracker_panic(crash)
    assert not explained_by_tracker_panic(Crash("kube-apiserver", 0.0, cause, frame, "x", True))
    assert crash.line().startswith("kube-scheduler exited at 00:00:00 UTC: panic: runtime error: index out of range")


def test_a_fatal_line_or_the_last_line_when_there_is_no_panic() -> None:
    assert crash_cause('I1207 up\nF1207 06:31:30.1  3231 server.go:9] "failed to run" err="no"\n')[0] == (
        'server.go:9] "failed to run" err="no"'
    )
    assert crash_cause("I1207 started\nsomething odd\n\n") == (
        "no panic or fatal line in its log (killed from outside?); its last line: something odd",
        "",
    )
    assert crash_cause("I1207 up\nSIGABRT: abort\nPC=0x47d3e1 m=0 sigcode=0\n\ngs     0x0\n")[0] == "SIGABRT: abort"


def test_a_crashed_component_is_recorded_and_started_again(state: Path) -> None:
    stand_in = StandIn(state)
    try:
        stand_in.start("kube-scheduler")
        stand_in.start("kube-apiserver")
        (state / "logs" / "kube-scheduler.log").write_text(PANIC_LOG.read_text())
        watch = _watch(state, stand_in)
        watch.check()
        assert watch.crashes == []  # both running
        stand_in.crash("kube-scheduler")
        watch.check()
        [crash] = watch.crashes
        assert crash.component == "kube-scheduler" and crash.restarted and "index out of range" in crash.cause
        assert stand_in.restarts == [("kube-scheduler", f"exited on its own: {crash.cause}")]
        watch.check()
        assert len(watch.crashes) == 1  # the new process runs
    finally:
        stand_in.close()


def test_a_restart_on_purpose_is_not_a_crash_and_one_that_keeps_dying_is_left_down(state: Path) -> None:
    stand_in = StandIn(state)
    try:
        stand_in.start("kube-scheduler")
        stand_in.start("kube-apiserver")
        watch = _watch(state, stand_in)
        with watch.paused("kube-apiserver"):
            stand_in.crash("kube-apiserver")
            watch.check()
            assert watch.crashes == []
            stand_in.start("kube-apiserver")
        for _ in range(MAX_RESTARTS + 1):
            stand_in.crash("kube-scheduler")
            watch.check()
        assert len(watch.crashes) == MAX_RESTARTS + 1 and not watch.crashes[-1].restarted
        assert len(stand_in.restarts) == MAX_RESTARTS
        watch.check()  # left down: neither recorded again nor started
        assert len(watch.crashes) == MAX_RESTARTS + 1
    finally:
        stand_in.close()


def test_the_loop_sees_a_crash_within_its_poll(state: Path) -> None:
    stand_in = StandIn(state)
    try:
        stand_in.start("kube-scheduler")
        stand_in.start("kube-apiserver")
        watch = _watch(state, stand_in)
        watch.start()
        stand_in.crash("kube-scheduler")
        deadline = time.monotonic() + 10
        while not watch.crashes and time.monotonic() < deadline:
            time.sleep(0.1)
        watch.stop()
        assert [c.component for c in watch.crashes] == ["kube-scheduler"]
    finally:
        stand_in.close()
