"""Who uses the dockerd the suite started: the last user stops it, not the first to end.

Several runs (an image build, a kind suite, a selftest) may share one dockerd that one of them started. Each user
holds a lease: a file named after its process (pid and the process's start time, so a reused pid is not taken for
it) in the state folder. A user ending removes its lease and stops dockerd only when no other live lease is left.
Crash-safe: the lease of a process that is gone counts for nothing (pruned by the next look), so a crashed user
never keeps dockerd up for ever, and a dockerd left by a crashed last user is taken over (and stopped) by the next
run. A kept cluster's lease (keep) names no process and stays until removed by hand. Every decision is taken under
one flock, so a run never joins a dockerd that another is stopping.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

KEPT = "kept"


def process_start(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22), None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    if fields[0] == "Z":  # a zombie has ended; only its parent has not reaped it yet
        return None
    return int(fields[19])


def alive(pid: int, start: int) -> bool:
    return process_start(pid) == start


@dataclass
class EngineUsers:
    """The leases on the suite-started dockerd, kept in `state` (the folder of its pidfile and log)."""

    state: Path

    @property
    def _users(self) -> Path:
        return self.state / "users"

    @property
    def _dockerd(self) -> Path:
        return self.state / "dockerd.json"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.state.mkdir(parents=True, exist_ok=True)
        with (self.state / "engine.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def started_dockerd(self) -> int | None:
        """The pid of the dockerd a run of the suite started, while that process lives; None (record dropped) else."""
        try:
            seen = json.loads(self._dockerd.read_text())
        except (FileNotFoundError, ValueError):
            return None
        if alive(seen["pid"], seen["start"]):
            return int(seen["pid"])
        self.forget_dockerd()
        return None

    def record_dockerd(self, pid: int) -> None:
        start = process_start(pid)
        if start is None:
            raise RuntimeError(f"dockerd (pid {pid}) is gone before it could be recorded")
        self._dockerd.write_text(json.dumps({"pid": pid, "start": start}))

    def forget_dockerd(self) -> None:
        self._dockerd.unlink(missing_ok=True)

    def join(self, pid: int | None = None) -> str:
        """A new lease of process `pid` (default: this one); the token to leave with."""
        pid = os.getpid() if pid is None else pid
        start = process_start(pid)
        assert start is not None, f"no process {pid}"
        self._users.mkdir(parents=True, exist_ok=True)
        token = f"{pid}-{start}-{uuid.uuid4().hex[:8]}"
        (self._users / token).touch()
        return token

    def keep(self, token: str) -> Path:
        """Turn a lease into one that outlives its process (a kept cluster); returns the file to remove by hand."""
        kept = self._users / f"{KEPT}-{token}"
        (self._users / token).rename(kept)
        return kept

    def live(self) -> list[str]:
        """The leases that count: kept ones, and those whose process still runs (the others are removed)."""
        if not self._users.is_dir():
            return []
        out = []
        for path in sorted(self._users.iterdir()):
            if path.name.startswith(KEPT):
                out.append(path.name)
                continue
            try:
                pid, start, _ = path.name.split("-", 2)
                live = alive(int(pid), int(start))
            except ValueError:
                live = False
            if live:
                out.append(path.name)
            else:
                path.unlink(missing_ok=True)  # its process ended without leaving: crashed or killed
        return out

    def leave(self, token: str) -> list[str]:
        """Remove the lease; the leases still live after it (empty: the caller was the last user)."""
        (self._users / token).unlink(missing_ok=True)
        return self.live()
