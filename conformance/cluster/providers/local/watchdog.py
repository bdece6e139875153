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
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from conformance.cluster.crashlog import crash_cause
from conformance.cluster.providers.base import Crash, ProviderNotReady
from conformance.cluster.providers.local.processes import _running
from conformance.cluster.providers.local.restart import RESTARTABLE

POLL_S = 1.0
MAX_RESTARTS = 5  # per component: a component that keeps dying is said, and left down


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
