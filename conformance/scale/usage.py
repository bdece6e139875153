"""What the processes of one point cost: resident memory now and at its peak (VmHWM) and CPU seconds, per
control-plane component, per process of the implementation, and of the suite's own process; and the CPU each one
spent inside a phase (which one bounds a bring-up)."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from conformance.cluster.bench import component_name, machine_load, process_usage
from conformance.cluster.providers.local import leftover_processes

MIB = 2**20
GIB = 2**30
# The machine is shared: a point stops (and tears its cluster down) before its processes leave less than this.
MEMORY_FLOOR = 3 * GIB


class OutOfMemory(RuntimeError):
    """The machine's available memory fell below MEMORY_FLOOR while a point ran."""


def available_memory() -> int:
    """MemAvailable of /proc/meminfo, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass(frozen=True)
class Usage:
    rss: int  # bytes
    peak: int  # bytes (VmHWM: the most this process ever had resident)
    cpu: float  # seconds


def snapshot(marker: str, others: dict[str, list[int]]) -> dict[str, Usage]:
    """Per name: the control-plane processes whose command line mentions `marker` (by component), the processes
    in `others` (name -> pids) and the suite itself ("suite"); several processes of one name are added up."""
    found: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    pids = [(pid, component_name(cmd)) for pid, cmd in (leftover_processes(marker) if marker else [])]
    pids += [(pid, name) for name, group in others.items() for pid in group]
    pids.append((os.getpid(), "suite"))
    for pid, name in pids:
        if (used := process_usage(pid)) is not None:
            found[name].append(used)
    return {
        name: Usage(sum(u[0] for u in used), sum(u[1] for u in used), sum(u[2] for u in used))
        for name, used in found.items()
    }


def cpu_between(before: dict[str, Usage], after: dict[str, Usage]) -> dict[str, float]:
    """CPU seconds each process spent between two snapshots, most first."""
    spent = {name: round(u.cpu - before[name].cpu if name in before else u.cpu, 1) for name, u in after.items()}
    return dict(sorted(spent.items(), key=lambda kv: -kv[1]))


def as_figures(usage: dict[str, Usage]) -> dict[str, dict[str, float]]:
    return {
        name: {"rssMiB": round(u.rss / MIB), "peakRssMiB": round(u.peak / MIB), "cpuSeconds": round(u.cpu, 1)}
        for name, u in sorted(usage.items())
    }


@dataclass
class Phases:
    """Wall time, machine load and the CPU of every process, per phase of a point."""

    marker: str
    others: dict[str, list[int]] = field(default_factory=dict)
    phases: dict[str, dict[str, object]] = field(default_factory=dict)
    suite_rss: dict[str, float] = field(default_factory=dict)  # MiB of the suite's process at the end of each phase
    least_available: int = 0  # the least MemAvailable any guard saw (bytes; 0: none looked yet)
    _last: tuple[float, dict[str, Usage]] | None = None

    def begin(self) -> None:
        self._last = (time.monotonic(), snapshot(self.marker, self.others))

    def guard(self, floor: int = MEMORY_FLOOR) -> None:
        """Raise OutOfMemory, naming the largest processes, once the machine has less than `floor` available."""
        available = available_memory()
        self.least_available = min(self.least_available or available, available)
        if available >= floor:
            return
        largest = sorted(snapshot(self.marker, self.others).items(), key=lambda kv: -kv[1].rss)[:4]
        raise OutOfMemory(
            f"stopped: the machine has {available / GIB:.1f} GiB available (floor {floor / GIB:.0f} GiB); largest: "
            + ", ".join(f"{name} {u.rss / GIB:.1f} GiB" for name, u in largest)
        )

    def end(self, phase: str) -> dict[str, Usage]:
        """Close `phase` (begun at the previous end or begin); the snapshot taken now."""
        now = snapshot(self.marker, self.others)
        started, before = self._last or (time.monotonic(), {})
        self.phases[phase] = {
            "seconds": round(time.monotonic() - started, 1),
            "load1m": round(machine_load(), 1),
            "cpuSeconds": cpu_between(before, now),
        }
        if "suite" in now:
            self.suite_rss[phase] = round(now["suite"].rss / MIB, 1)
        self._last = (time.monotonic(), now)
        return now
