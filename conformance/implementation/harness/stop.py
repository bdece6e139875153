"""Stopping the implementation: every process at once (SIGTERM, then SIGKILL after a grace), the teardown hooks,
the holder pods and the manifests; nothing of it outlives the run."""

from __future__ import annotations

import signal
import subprocess
import time

from conformance.cluster.interrupts import shielded
from conformance.cluster.waits import CANCELLED
from conformance.implementation import endpoints
from conformance.implementation.harness.process import Processes, _signal_group
from conformance.implementation.harness.state import ImplementationFailed, _Running
from conformance.implementation.profile import ProfileError

STOP_TIMEOUT_S = 15.0
INTERRUPTED_STOP_TIMEOUT_S = 3.0  # an interrupted run ends in seconds: a process gets this long to exit cleanly


class Stopping(Processes):
    """The end of the run (and of the processes of a node that left)."""

    def stop(self) -> list[str]:
        """Stop every process at once (SIGTERM to each process group, SIGKILL to what is left after a grace: the
        full one normally, a short one when the run was interrupted); return what went wrong.

        Shielded from interrupts, and whatever happens meanwhile, no process of the implementation outlives it.
        """
        with shielded():
            try:
                return self._stop()
            finally:
                self._kill_all()

    def _terminate(self, runs: list[_Running], grace: float) -> list[str]:
        """SIGTERM to each, SIGKILL to what is left after `grace`; what went wrong."""
        problems = []
        exited = {id(run) for run in runs if run.proc.poll() is not None}
        for run in runs:
            if id(run) not in exited:
                _signal_group(run.proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for run in runs:
            if id(run) in exited:
                problems.append(f"{run.name} had exited before the end ({run.proc.returncode}):\n{run.tail()}")
                continue
            try:
                run.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(run.proc, signal.SIGKILL)
                run.proc.wait()
                problems.append(f"{run.name} ignored SIGTERM for {grace:g}s and was killed")
                continue
            code = run.proc.returncode
            if code not in (0, -signal.SIGTERM):
                problems.append(f"{run.name} exited with {code} on SIGTERM; last lines:\n{run.tail()}")
            self.progress(f"stopped {run.name}")
        return problems

    def _stop(self) -> list[str]:
        if self._follower is not None:  # first: no node event starts or stops anything during the stop
            self._follower.stop()
            self._follower = None
        with self._restarting:
            grace = INTERRUPTED_STOP_TIMEOUT_S if CANCELLED.is_set() else STOP_TIMEOUT_S
            # newest first, as they were started in order
            problems = self._node_problems + self._terminate(list(reversed(self.running)), grace)
            self._node_problems = []
            for hook in self.loaded.profile.hooks.teardown:
                try:
                    self._run_once(hook.name, hook.command, hook.env, hook.timeout_s, "teardown")
                except (ImplementationFailed, ProfileError) as exc:
                    problems.append(str(exc))
            for node in list(self._holders):
                problems += self._remove_holders(node)
            problems += self._delete_manifests()
            while self._registered:
                endpoints.unregister(self._registered.pop())
            if self._client is not None:
                self._client.close()
                self._client = None
            return problems

    def _kill_all(self) -> None:
        """SIGKILL every process group still alive (also at interpreter exit: nothing outlives the run). Every
        group is signalled before any is waited for, so an interrupt while waiting cannot spare one."""
        alive = [run for run in self.running if run.proc.poll() is None]
        self.running = []
        for run in alive:
            _signal_group(run.proc, signal.SIGKILL)
        for run in alive:
            run.proc.wait()
