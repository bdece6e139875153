"""Interrupt handling without a cluster: the signal handler, the shield, and stopping an implementation's processes
all at once (real child processes; the Kubernetes API is faked away: the profiles have no manifests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster import interrupts
from conformance.cluster.waits import CANCELLED
from conformance.implementation import harness
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import API_VERSION, KIND, load_profile

# A process that ignores SIGTERM (like a hung controller) and starts a child of its own.
STUBBORN = (
    "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
    "print('ready', flush=True); time.sleep(300)"
)
POLITE = "import time; print('ready', flush=True); time.sleep(300)"


@pytest.fixture(autouse=True)
def _handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in interrupts.SIGNALS}
    for sig in interrupts.SIGNALS:
        signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)
    interrupts.reset()
    yield
    interrupts.reset()
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def _no_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake: no cluster here, and these profiles have no manifests to apply or delete."""
    monkeypatch.setattr(Implementation, "_apply_manifests", lambda self: None)
    monkeypatch.setattr(Implementation, "_delete_manifests", lambda self: [])


def _signal_self(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.5)  # the handler runs in the main thread at the next bytecode


def test_first_signal_interrupts_and_cancels_every_wait() -> None:
    said: list[str] = []
    interrupts.install(said.append)
    with pytest.raises(KeyboardInterrupt):
        _signal_self(signal.SIGTERM)
    assert CANCELLED.is_set() and interrupts.interrupted() == "SIGTERM"
    _signal_self(signal.SIGINT)  # the second one only says so: the teardown under way goes on
    assert said and "already stopping" in said[-1]


def test_a_signal_inside_the_shield_lets_the_clean_up_finish() -> None:
    said: list[str] = []
    interrupts.install(said.append)
    finished = False
    with interrupts.shielded():
        _signal_self(signal.SIGINT)
        finished = True
    assert finished and interrupts.interrupted() == "SIGINT" and CANCELLED.is_set()


def _profile(tmp_path: Path, *scripts: str) -> Path:
    processes = "\n".join(
        f"  - name: p{i}\n    command: [{sys.executable!r}, '-c', {script!r}]\n    ready: {{log: ready}}"
        for i, script in enumerate(scripts)
    )
    path = tmp_path / "profile.yaml"
    head = f"apiVersion: {API_VERSION}\nkind: {KIND}\nname: t\nversion: '1'\ndriver: d.example.com\n"
    path.write_text(f"{head}processes:\n{processes}\n")
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_interrupted_stop_kills_every_process_and_its_children_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impl = Implementation(load_profile(_profile(tmp_path, POLITE, STUBBORN, POLITE)), tmp_path / "kc", tmp_path / "w")
    impl.start()
    pids = [run.proc.pid for run in impl.running]
    CANCELLED.set()  # as after a signal: the short grace applies
    started = time.monotonic()
    problems = impl.stop()
    took = time.monotonic() - started
    assert took < harness.INTERRUPTED_STOP_TIMEOUT_S + 2, f"stop took {took:.1f}s"
    assert problems == [f"p1 ignored SIGTERM for {harness.INTERRUPTED_STOP_TIMEOUT_S:g}s and was killed"]
    assert not [pid for pid in pids if _alive(pid)] and impl.running == []
    children = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _child_of(p, pids)]
    assert not children, "a child of a stopped process is still running"


def _child_of(proc: Path, parents: list[int]) -> bool:
    try:
        stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return stat[0] != "Z" and int(stat[1]) in parents


def test_an_interrupt_during_stop_leaves_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug this fixes: a SIGTERM while stopping left the processes not yet stopped running."""
    impl = Implementation(load_profile(_profile(tmp_path, STUBBORN, STUBBORN)), tmp_path / "kc", tmp_path / "w")
    impl.start()
    pids = [run.proc.pid for run in impl.running]

    def interrupted_wait(*_args: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(subprocess.Popen, "wait", interrupted_wait, raising=True)
    with pytest.raises(KeyboardInterrupt):
        impl.stop()
    monkeypatch.undo()
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if _alive(pid)]
