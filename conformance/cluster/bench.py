"""Figures of the local provider: bring-up to all nodes Ready, teardown, memory of the control plane.

A benchmark prints figures; it passes or fails nothing. Run with `make bench-cluster`.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from pathlib import Path

import click

from conformance.cluster.providers.base import ClusterSpec, default_nodes
from conformance.cluster.providers.local import PHASES, LocalProvider, leftover_processes, phase_summary
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.versions import KubeVersion

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def process_usage(pid: int) -> tuple[int, int, float] | None:
    """(resident bytes now, peak resident bytes (VmHWM), CPU seconds used so far) of a process; None once it is
    gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if line.startswith(("VmRSS:", "VmHWM:")))
    kib = {k: int(v.split()[0]) for k, v in fields.items()}
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return kib.get("VmRSS", 0) * 1024, kib.get("VmHWM", 0) * 1024, cpu


def component_name(cmd: str) -> str:
    exe = Path(cmd.split()[0]).name
    return next((c for c in COMPONENTS if exe.startswith(c)), exe)


def control_plane_usage(marker: str) -> tuple[dict[str, int], dict[str, float]]:
    """Resident memory (bytes) and CPU time used so far (seconds) of each control-plane process whose command
    line mentions `marker`. CPU seconds to Ready do not depend on how busy the machine is, unlike wall time."""
    rss: dict[str, int] = defaultdict(int)
    cpu: dict[str, float] = defaultdict(float)
    for pid, cmd in leftover_processes(marker):
        if (used := process_usage(pid)) is None:
            continue
        name = component_name(cmd)
        rss[name] += used[0]
        cpu[name] += used[2]
    return dict(rss), dict(cpu)


def machine_load() -> float:
    """The 1-minute load average (2 cores here: above 2 means the bring-up shared the CPUs)."""
    return os.getloadavg()[0]


def floor_phase(timings: dict[str, float]) -> str:
    """The phase that took longest after the one that ended before it: what a faster bring-up has to shorten."""
    ended = sorted((t, p) for p, t in timings.items() if p in PHASES and p != "bring_up_s")
    gaps = [(t - (ended[i - 1][0] if i else 0.0), p) for i, (t, p) in enumerate(ended)]
    return max(gaps)[1] if gaps else "bring_up_s"


def bench_local_cluster(version: KubeVersion, *, runs: int, nodes: int, out: Path | None) -> dict:
    binaries = ensure_binaries(version)
    sizes = {
        p.name: p.stat().st_size for p in [*binaries.kube.values(), binaries.etcd, binaries.kwok, binaries.kwokctl]
    }
    bring_up, teardown, memory, cpu, loads = [], [], [], [], []
    phases: dict[str, list[float]] = defaultdict(list)
    floors: list[str] = []
    for run in range(1, runs + 1):
        loads.append(machine_load())
        provider = LocalProvider(progress=lambda _msg: None)
        provider.start(ClusterSpec(version=version, nodes=default_nodes(nodes)))
        assert provider.workdir is not None
        rss, used = control_plane_usage(str(provider.workdir))
        memory.append(rss)
        cpu.append(used)
        provider.stop()
        for phase in PHASES:
            if phase in provider.timings:
                phases[phase].append(provider.timings[phase])
        floors.append(floor_phase(provider.timings))
        bring_up.append(provider.timings["bring_up_s"])
        teardown.append(provider.timings["teardown_s"])
        click.echo(
            f"run {run}/{runs}: bring-up {bring_up[-1]:.2f}s ({phase_summary(provider.timings)}), "
            f"teardown {teardown[-1]:.2f}s, control plane RSS {sum(rss.values()) / 2**20:.0f} MiB, "
            f"CPU to Ready {sum(used.values()):.1f}s, load {loads[-1]:.1f}"
        )
    figures = {
        "kubernetes": str(version),
        "nodes": nodes,
        "runs": runs,
        "bring_up_s": {"median": statistics.median(bring_up), "min": min(bring_up), "max": max(bring_up)},
        "phases_median_s": dict(
            sorted(((p, statistics.median(v)) for p, v in phases.items()), key=lambda item: item[1])
        ),
        "floor": max(set(floors), key=floors.count),
        "cpu_s_median": {c: statistics.median(u.get(c, 0.0) for u in cpu) for c in sorted({c for u in cpu for c in u})},
        "load_1m": {"median": statistics.median(loads), "min": min(loads), "max": max(loads)},
        "teardown_s": {"median": statistics.median(teardown), "min": min(teardown), "max": max(teardown)},
        "rss_mib_median": {
            c: statistics.median(m.get(c, 0) for m in memory) / 2**20 for c in sorted({c for m in memory for c in m})
        },
        "binary_mib": {name: size / 2**20 for name, size in sizes.items()},
    }
    figures["rss_mib_median"]["total"] = statistics.median(sum(m.values()) for m in memory) / 2**20
    figures["cpu_s_median"]["total"] = statistics.median(sum(u.values()) for u in cpu)
    click.echo(
        f"\nKubernetes {version}, {nodes} kwok nodes, {runs} runs, machine load (1 min) "
        f"{figures['load_1m']['median']:.1f} median ({min(loads):.1f}-{max(loads):.1f}) on {os.cpu_count()} CPUs"
    )
    click.echo(
        f"bring-up to all nodes Ready: median {figures['bring_up_s']['median']:.2f}s "
        f"(min {min(bring_up):.2f}, max {max(bring_up):.2f})"
    )
    click.echo(
        "bring-up phases (median s from start): "
        + ", ".join(f"{p.removesuffix('_s')} {v:.2f}" for p, v in figures["phases_median_s"].items())
    )
    click.echo(
        f"the floor (the phase with the longest wait after the one before it, most often): "
        f"{figures['floor'].removesuffix('_s')}; "
        "CPU seconds to Ready (median): " + ", ".join(f"{c} {v:.1f}" for c, v in figures["cpu_s_median"].items())
    )
    click.echo(
        f"teardown: median {figures['teardown_s']['median']:.2f}s (min {min(teardown):.2f}, max {max(teardown):.2f})"
    )
    click.echo(
        "control plane RSS (median MiB): " + ", ".join(f"{c} {v:.0f}" for c, v in figures["rss_mib_median"].items())
    )
    click.echo("binary sizes (MiB): " + ", ".join(f"{n} {v:.0f}" for n, v in figures["binary_mib"].items()))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures
