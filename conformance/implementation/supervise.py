"""Run a profile's implementation outside any test run, supervised like a Deployment (`implementation up`).

The suite's harness starts the processes in profile order (same placeholders, manifests, hooks, readiness, logs);
then a process that exits is started again after a back-off, as a ReplicaSet replaces a pod that died, and
SIGINT/SIGTERM stop everything in reverse order (each process's own clean shutdown, the teardown hooks, the
manifests the harness applied). The state folder says where things are, for a profile that describes this
implementation as one the suite does not start (fixtures/profiles/reference-external.yaml):

  env       KEY=VALUE lines to source: DRA_CONFORMANCE_STATE (this folder) and NAME_URL=http://127.0.0.1:PORT per
            process with a port (fabric-manager -> FABRIC_MANAGER_URL); written once everything is ready
  NAME.pid  the pid of process NAME, rewritten once a restarted process is ready again
  NAME.log  its output (a run that died: NAME.killed-N.log)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from conformance.cluster.waits import wait_for
from conformance.implementation.harness import Implementation, ImplementationFailed
from conformance.implementation.profile import ProfileError

ENV_FILE = "env"
STATE_VARIABLE = "DRA_CONFORMANCE_STATE"
POLL_S = 0.5
MAX_BACKOFF_S = 30.0  # as kubelet's crash-loop back-off, shorter: 1, 2, 4, ... 30 s between restarts


class Interrupted(BaseException):
    """SIGINT or SIGTERM: stop starting things and shut down (a BaseException so no `except Exception` eats it)."""


def url_variable(process: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", process.upper()) + "_URL"  # NAME@NODE of a perNode process too


def pid_file(state: Path, process: str) -> Path:
    return state / f"{process}.pid"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # readers never see half a file


@dataclass
class Watchdog:
    impl: Implementation
    say: Callable[[str], None]
    failures: dict[str, int] = field(default_factory=dict)  # consecutive failed starts per process
    not_before: dict[str, float] = field(default_factory=dict)  # back-off: no restart before this monotonic time

    @property
    def state(self) -> Path:
        return self.impl.workdir

    def env(self) -> dict[str, str]:
        values = {STATE_VARIABLE: str(self.state.resolve())}
        for run in self.impl.running:
            if run.port is not None:
                values[url_variable(run.name)] = f"http{'s' if run.spec.tls else ''}://127.0.0.1:{run.port}"
        return values

    def write_state(self) -> None:
        for run in self.impl.running:
            _write(pid_file(self.state, run.name), f"{run.proc.pid}\n")
        _write(self.state / ENV_FILE, "".join(f"{k}={v}\n" for k, v in self.env().items()))

    def clear_state(self) -> None:
        (self.state / ENV_FILE).unlink(missing_ok=True)
        for path in self.state.glob(pid_file(self.state, "*").name):
            path.unlink(missing_ok=True)

    def run(self) -> list[str]:
        """Start, supervise until SIGINT/SIGTERM, stop; what went wrong on the way down."""
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        interrupted: list[int] = []

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            if not interrupted:  # the first one interrupts; the stop itself is not interrupted again
                interrupted.append(signum)
                raise Interrupted

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            try:
                self.impl.start()  # stops what it started if it fails
            except Interrupted:
                self.say(f"signal {interrupted[0]} while starting: stopped what had started")
                return []
            try:
                self.write_state()
                self.say(f"ready; environment in {self.state / ENV_FILE}; stop with SIGINT or SIGTERM")
                while True:
                    self._check_once()
                    time.sleep(POLL_S)
            except Interrupted:
                self.say(f"signal {interrupted[0]}: stopping")
            finally:  # also on an unexpected error: never leave a process of the stack behind
                problems = self.impl.stop()
                self.clear_state()
            return problems
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _check_once(self) -> None:
        """Start again every process that exited (after its back-off); a process whose port changed takes the
        processes after it along, since their commands hold its URL."""
        names = [r.name for r in self.impl.running]
        for name in names:
            run = next((r for r in self.impl.running if r.name == name), None)
            if run is None or run.proc.poll() is None or time.monotonic() < self.not_before.get(name, 0.0):
                continue
            self.say(f"{name} exited with {run.proc.returncode}; last lines:\n{run.tail(10)}")
            port = run.port
            try:
                self.impl.restart(name)
            except (ImplementationFailed, ProfileError) as exc:
                count = self.failures[name] = self.failures.get(name, 0) + 1
                delay = min(MAX_BACKOFF_S, 2.0 ** (count - 1))
                self.not_before[name] = time.monotonic() + delay
                self.say(f"{name} did not come back ({exc}); next try in {delay:g}s")
                continue
            self.failures.pop(name, None)
            restarted = next(r for r in self.impl.running if r.name == name)
            self.say(f"{name} is back (pid {restarted.proc.pid})")
            if port is not None and restarted.port != port:
                later = names[names.index(name) + 1 :]
                self.say(f"{name} is on port {restarted.port} now (was {port}): restarting {later}")
                for other in later:
                    try:
                        self.impl.restart(other)
                    except (ImplementationFailed, ProfileError) as exc:  # the next pass retries it (it has exited)
                        self.say(f"{other} did not come back ({exc})")
            self.write_state()


def restart_process(state: Path, name: str, timeout: float) -> tuple[int, int]:
    """Kill process `name` of a supervised implementation (SIGKILL: a crash, no clean shutdown) and wait until the
    supervisor has it ready again; (old pid, new pid). What a restart command for `roles` does here."""
    path = pid_file(state, name)
    try:
        old = int(path.read_text())
    except (OSError, ValueError) as exc:
        raise ImplementationFailed(f"no pid of {name!r} in {path} ({exc}): is `implementation up` running?") from None
    try:
        os.kill(old, signal.SIGKILL)
    except ProcessLookupError:
        raise ImplementationFailed(f"{name}: pid {old} from {path} is not running") from None

    def current() -> int | None:
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            return None

    new = wait_for(
        current,
        lambda pid: pid is not None and pid != old,
        timeout=timeout,
        expected=f"the supervisor to start {name} again and write its new pid to {path} (killed pid {old})",
    )
    assert new is not None
    return old, new


def read_env(state: Path) -> dict[str, str]:
    """The variables of the state folder's env file."""
    return dict(line.split("=", 1) for line in (state / ENV_FILE).read_text().splitlines() if "=" in line)


def start_in_background(
    profile: Path, kubeconfig: Path, state: Path, log: Path, timeout: float, cwd: Path | None = None
) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`dra-conformance implementation up` as a child process (output to `log`), returned once everything is ready:
    the process and the variables of its env file. For scripts and tests; the caller stops it with SIGTERM."""
    cli = Path(sys.executable).parent / "dra-conformance"
    argv = [str(cli), "implementation", "up", "--profile", str(profile), "--kubeconfig", str(kubeconfig)]
    with log.open("wb") as out:
        proc = subprocess.Popen([*argv, "--state", str(state)], cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(
            lambda: (state / ENV_FILE).exists() or proc.poll() is not None,
            bool,
            timeout=timeout,
            expected=f"implementation up to write {state / ENV_FILE}",
            describe=lambda _: log.read_text(errors="replace")[-3000:],
        )
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if proc.poll() is not None:
        raise ImplementationFailed(f"implementation up exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
    return proc, read_env(state)
