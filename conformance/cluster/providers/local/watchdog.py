"""Watch a local cluster's control plane while a run uses it, as the kubelet watches a real control-plane node's
static pods: a component that exited on its own (a panic, a fatal error) is recorded with its cause from its log and
started again with the command line it ran, so the rest of the run meets a cluster that recovered the way a real one
does, and the crash itself is a finding of the cluster (SCH-11), not a string of wait timeouts in later scenarios.

Measured 2026-12-07 (a soak of the reschedule-to-local reference, 1.37.2): kube-scheduler panicked in the DRA
ResourceSlice tracker (`index out of range` in syncSlice on a DeviceTaintRule delete) and, unwatched, stayed down
for the last 12 minutes of the run: every later scenario failed on a wait.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from conformance.cluster.providers.base import Crash, ProviderNotReady
from conformance.cluster.providers.local.processes import _running
from conformance.cluster.providers.local.restart import RESTARTABLE

POLL_S = 1.0
MAX_RESTARTS = 5  # per component: a component that keeps dying is said, and left down
# klog's own lines, then Go's runtime: the first that says why the process ended.
_PANIC = re.compile(r"^(panic: .*|fatal error: .*)$")
_OBSERVED = re.compile(r'"Observed a panic" panic="([^"]*)"')
_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ (.*)$")
_FAILED = re.compile(r'"command failed" err="(.*)"')
_SIGNAL = re.compile(r"^(SIG[A-Z]+: .*)$")  # Go's own report of a fatal signal (SIGSEGV, SIGABRT), then its registers
_FRAME = re.compile(r"^\t?(\S+\(.*\))$")  # a function of a goroutine trace, its file:line on the next line


def crash_cause(log_tail: str) -> tuple[str, str]:
    """Why a component ended, from the end of its log: (the panic or fatal line, the frame it panicked in)."""
    lines = log_tail.splitlines()
    cause = ""
    for pattern in (_PANIC, _SIGNAL, _FATAL, _FAILED):
        found = [m.group(1) for line in lines if (m := pattern.match(line.strip()) or pattern.search(line))]
        if found:
            cause = found[-1] if pattern in (_FATAL, _FAILED) else found[0]
            break
    if not cause and (observed := [m.group(1) for line in lines if (m := _OBSERVED.search(line))]):
        cause = f"panic: {observed[0]}"
    if not cause:  # e.g. killed from outside (SIGKILL): nothing of its own to say
        last = next((line.strip() for line in reversed(lines) if line.strip()), "")
        cause = f"no panic or fatal line in its log (killed from outside?); its last line: {last[:200]}"
    return cause[:300], _panicking_frame(lines)


def _panicking_frame(lines: list[str]) -> str:
    """The first frame after the runtime's `panic(...)` in a goroutine trace: where the component's own code failed."""
    for i, line in enumerate(lines):
        if not line.strip().startswith("panic("):
            continue
        for j in range(i + 1, min(i + 12, len(lines) - 1)):
            frame = lines[j].strip()
            if frame.startswith("runtime/") or not _FRAME.match(frame):
                continue
            where = lines[j + 1].strip().split(" +")[0]
            return f"{frame.rsplit('(', 1)[0]} ({where.rsplit('/', 1)[-1]})"  # the function, not its arguments
    return ""


@dataclass
class Watchdog:
    """One local cluster's watch: `restart(name, why)` starts a component again (the provider's Restarter)."""

    state: Path  # kwokctl's state folder: pids/, logs/
    restart: Callable[[str, str], None]
    progress: Callable[[str], None]
    log_label: Callable[[Path], str] = str  # how a report names the component's log (where the run keeps it)
    components: tuple[str, ...] = RESTARTABLE
    crashes: list[Crash] = field(default_factory=list)
    _paused: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="control-plane-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """A deliberate restart (lifecycle): its moment without a process is not a crash."""
        with self._lock:
            self._paused.add(name)
        try:
            yield
        finally:
            with self._lock:
                self._paused.discard(name)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            for name in self.components:
                with self._lock:
                    if name in self._paused or self._stop.is_set():
                        continue
                    if self._exited(name):
                        self._recover(name)

    def _exited(self, name: str) -> bool:
        pidfile = self.state / "pids" / f"{name}.pid"
        pid = pidfile.read_text().strip() if pidfile.exists() else ""
        return pid.isdigit() and not _running(int(pid))

    def check(self) -> None:
        """One pass now (the loop's, also for a caller that must know before it judges)."""
        for name in self.components:
            with self._lock:
                if name not in self._paused and self._exited(name):
                    self._recover(name)

    def _recover(self, name: str) -> None:
        log = self.state / "logs" / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        tail = text[text.rfind("--- restarted by dra-conformance") :] if "--- restarted by" in text else text
        cause, frame = crash_cause("\n".join(tail.splitlines()[-400:]))
        count = sum(1 for c in self.crashes if c.component == name)
        crash = Crash(name, time.time(), cause, frame, self.log_label(log), restarted=count < MAX_RESTARTS)
        self.crashes.append(crash)
        if not crash.restarted:
            self.progress(f"{name} exited again ({cause}); {MAX_RESTARTS} restarts already: left down")
            self._paused.add(name)
            return
        where = f" in {frame}" if frame else ""
        self.progress(f"{name} exited: {cause}{where}; starting it again (as a kubelet would)")
        try:
            self.restart(name, f"exited on its own: {cause}")
        except ProviderNotReady as exc:
            self.progress(f"{name} did not come back: {str(exc).splitlines()[0]}")
            self._paused.add(name)
