"""Figures of the local provider: bring-up to all nodes Ready, teardown, memory of the control plane.

A benchmark prints figures; it passes or fails nothing. Run with `make bench-cluster`.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import click

from conformance.cluster.providers.base import ClusterSpec, default_nodes
from conformance.cluster.providers.local import LocalProvider, leftover_processes
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.versions import KubeVersion

# Seconds from start to the end of each bring-up phase (LocalProvider.timings).
PHASES = ("kwokctl_create_s", "apiserver_ready_s", "control_plane_ready_s", "bring_up_s")
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def control_plane_rss(marker: str) -> dict[str, int]:
    """Resident memory (bytes) of each control-plane process whose command line mentions `marker`."""
    rss: dict[str, int] = defaultdict(int)
    for pid, cmd in leftover_processes(marker):
        exe = Path(cmd.split()[0]).name
        name = next((c for c in COMPONENTS if exe.startswith(c)), exe)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[name] += int(line.split()[1]) * 1024
    return dict(rss)


def bench_local_cluster(version: KubeVersion, *, runs: int, nodes: int, out: Path | None) -> dict:
    binaries = ensure_binaries(version)
    sizes = {
        p.name: p.stat().st_size for p in [*binaries.kube.values(), binaries.etcd, binaries.kwok, binaries.kwokctl]
    }
    bring_up, teardown, memory = [], [], []
    phases: dict[str, list[float]] = defaultdict(list)
    for run in range(1, runs + 1):
        provider = LocalProvider(progress=lambda _msg: None)
        provider.start(ClusterSpec(version=version, nodes=default_nodes(nodes)))
        assert provider.workdir is not None
        memory.append(control_plane_rss(str(provider.workdir)))
        provider.stop()
        for phase in PHASES:
            phases[phase].append(provider.timings[phase])
        bring_up.append(provider.timings["bring_up_s"])
        teardown.append(provider.timings["teardown_s"])
        click.echo(
            f"run {run}/{runs}: bring-up {bring_up[-1]:.2f}s, teardown {teardown[-1]:.2f}s, "
            f"control plane RSS {sum(memory[-1].values()) / 2**20:.0f} MiB"
        )
    figures = {
        "kubernetes": str(version),
        "nodes": nodes,
        "runs": runs,
        "bring_up_s": {"median": statistics.median(bring_up), "min": min(bring_up), "max": max(bring_up)},
        "phases_median_s": {phase: statistics.median(values) for phase, values in phases.items()},
        "teardown_s": {"median": statistics.median(teardown), "min": min(teardown), "max": max(teardown)},
        "rss_mib_median": {
            c: statistics.median(m.get(c, 0) for m in memory) / 2**20 for c in sorted({c for m in memory for c in m})
        },
        "binary_mib": {name: size / 2**20 for name, size in sizes.items()},
    }
    figures["rss_mib_median"]["total"] = statistics.median(sum(m.values()) for m in memory) / 2**20
    click.echo(f"\nKubernetes {version}, {nodes} kwok nodes, {runs} runs")
    click.echo(
        f"bring-up to all nodes Ready: median {figures['bring_up_s']['median']:.2f}s "
        f"(min {min(bring_up):.2f}, max {max(bring_up):.2f})"
    )
    click.echo(
        "bring-up phases (median s from start): "
        + ", ".join(f"{p.removesuffix('_s')} {v:.2f}" for p, v in figures["phases_median_s"].items())
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
