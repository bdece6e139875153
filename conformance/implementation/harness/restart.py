"""Restarting a part of the running stack (IMP-8): a role's process killed and started again, or its restart
command run."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from conformance.implementation.harness.start import Starting
from conformance.implementation.harness.state import ImplementationFailed, _Running
from conformance.implementation.profile import Role


class Restarting(Starting):
    """Restarts mid-run, one at a time."""

    def restart_role(
        self, role: Role, window: list[float] | None = None, while_down: Callable[[], None] | None = None
    ) -> str:
        """Restart one role of the stack (IMP-8): its process, or its restart command. Says what was done; `window`
        gets the restart's own start and end (time.time()). `while_down` runs between the kill and the start (a
        process role only: a restart command is one step)."""
        if while_down is not None and role.process is None:
            raise ValueError(f"role {role.name} restarts by a command: nothing can run while it is down")
        with self._restarting:
            began = time.time()
            try:
                if role.process is not None:
                    pid = self.restart(role.process, while_down)
                    return f"killed {role.process} and started it again (pid {pid})"
                assert role.command is not None
                self._run_once(role.name, role.command, {}, role.timeout_s, "restart")
                self.restarts += 1
                return f"ran the restart command of {role.name}"
            finally:
                if window is not None:
                    window[:] = [began, time.time()]
                if role.process is None:  # a process's restart notes its own window
                    self.down.append((began, time.time()))

    def restart(self, name: str, while_down: Callable[[], None] | None = None) -> int:
        """Kill process `name` without warning (SIGKILL: no clean shutdown) and start it again; wait until it is
        ready. Returns the new pid. The killed run's log is kept next to the new one. `while_down` runs once the
        killed process is gone, before the new one starts."""
        with self._restarting:
            began = time.time()
            try:
                return self._restart(name, while_down)
            finally:
                self.down.append((began, time.time()))

    def _restart(self, name: str, while_down: Callable[[], None] | None) -> int:
        """`name`: a process, an instance NAME@NODE, or a perNode process (all its instances, killed together)."""
        runs = [r for r in self.running if r.name == name or (r.spec.per_node and r.spec.name == name)]
        if not runs:
            raise ImplementationFailed(f"no running process {name!r} (running: {[r.name for r in self.running]})")
        # Copy-on-write: scenario threads resolve {url:...} while this runs; never mutate the list they iterate.
        places = [self.running.index(run) for run in runs]
        self.running = [r for r in self.running if r not in runs]
        for run in runs:
            if run.proc.poll() is None:
                os.killpg(run.proc.pid, signal.SIGKILL)
        for run in runs:
            run.proc.wait()
        self.restarts += 1
        for run in runs:
            run.log.replace(run.log.with_suffix(f".killed-{self.restarts}.log"))
        pids = ", ".join(str(r.proc.pid) for r in runs)
        self.progress(f"killed {name} (pid {pids}); starting it again")
        started: list[_Running] = []
        try:
            if while_down is not None:
                while_down()
        finally:  # started again whatever while_down did: the shared stack must not stay down
            for run in runs:
                if run.node is None or run.node in self._nodes:  # not for a node that left meanwhile
                    started.append(self._start(run.spec, run.node))
        rest = [r for r in self.running if r not in started]
        for place, run in sorted(zip(places, started, strict=False), key=lambda pair: pair[0]):
            rest.insert(place, run)
        self.running = rest
        return started[0].proc.pid if started else 0
