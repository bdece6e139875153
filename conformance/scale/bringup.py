"""A local cluster of N kwok nodes for one point of `make scale`: the local provider starts the control plane with the
first few nodes (its own bring-up, unchanged), the rest are created side by side and followed by watch until every
one is Ready; each phase's wall time and the CPU every process spent in it say what bounds the bring-up."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.client import Cluster
from conformance.cluster.nodes import fake_node, node_ready
from conformance.cluster.providers.base import ClusterInfo, ClusterSpec, NodeSpec
from conformance.cluster.providers.local import LocalProvider, phase_summary
from conformance.cluster.versions import KubeVersion
from conformance.cluster.waits import wait_while_progressing
from conformance.scale.usage import Phases

FIRST_NODES = 8  # what the provider creates itself (the suite's default cluster)
CREATE_THREADS = 16  # node creations in flight: the apiserver, not one connection's round trips, sets the pace
READY_POLL_S = 2.0
NODES_PER_POLL_S = 1000  # the list grows with the nodes (5000: about 12 MB of JSON): one look per this many nodes, s


@dataclass
class BringUp:
    provider: LocalProvider
    info: ClusterInfo | None = None
    figures: dict[str, Any] = field(default_factory=dict)


def create_side_by_side(create: Callable[..., Any], bodies: list[dict[str, Any]], threads: int) -> None:
    """Create every object of `bodies` with `create(body=...)`, `threads` requests in flight. The answers are not
    turned into the client's models: CPU and memory the suite would spend on objects it throws away."""

    def one(body: dict[str, Any]) -> None:
        create(body=body, _preload_content=False).data  # noqa: B018 (read: the connection goes back to the pool)

    with ThreadPoolExecutor(threads, thread_name_prefix="create") as pool:
        list(pool.map(one, bodies))


def ready_nodes(cluster: Cluster) -> int:
    """How many nodes are Ready and without the condition taints now. One list as raw JSON: following thousands of
    nodes by watch through the client's models cost the suite as much CPU as kube-apiserver (measured: 24.9 of
    79 CPU seconds while 1000 nodes got Ready)."""
    response = cluster.core.list_node(_preload_content=False)
    return sum(1 for node in json.loads(response.data)["items"] if node_ready(node))


def bring_up(
    version: KubeVersion,
    nodes: list[NodeSpec],
    binding_timeout_s: int,
    stall_s: float,
    phases: Phases,
    say: Callable[[str], None],
    up: BringUp,
) -> ClusterInfo:
    """Start the cluster into `up` (whose provider the caller stops, also on failure) with every node Ready."""
    started = time.monotonic()
    phases.begin()
    up.info = up.provider.start(
        ClusterSpec(version=version, nodes=nodes[:FIRST_NODES], binding_timeout_s=binding_timeout_s, audit=False)
    )
    phases.marker = str(up.provider.workdir)
    phases.end("controlPlane")  # (its processes started inside the phase: their CPU counts from their start)
    cluster = Cluster(up.info)
    try:
        rest = nodes[FIRST_NODES:]
        t0 = time.monotonic()
        create_side_by_side(cluster.core.create_node, [fake_node(n) for n in rest], CREATE_THREADS)
        created = time.monotonic() - t0
        phases.end("createNodes")
        say(f"{len(rest)} more nodes created in {created:.1f}s ({len(rest) / created if created else 0:.0f}/s)")
        wait_while_progressing(
            lambda: phases.guard() or ready_nodes(cluster),
            lambda ready: ready >= len(nodes),
            lambda ready: ready,
            stall=stall_s,
            expected=f"{len(nodes)} nodes Ready and schedulable",
            describe=lambda ready: f"{ready} Ready",
            interval=max(READY_POLL_S, len(nodes) / NODES_PER_POLL_S),
        )
        phases.end("nodesReady")
    finally:
        cluster.close()
    total = time.monotonic() - started
    up.figures = {
        "seconds": round(total, 1),
        "controlPlane": phase_summary(up.provider.timings),
        "nodesCreated": len(nodes) - min(FIRST_NODES, len(nodes)),
        "createSeconds": round(created, 1),
        "nodesPerSecond": round((len(nodes) - FIRST_NODES) / created, 1) if created > 0 else None,
        "readyAfterCreateSeconds": phases.phases["nodesReady"]["seconds"],
        "phases": {k: phases.phases[k] for k in ("controlPlane", "createNodes", "nodesReady")},
    }
    say(f"{len(nodes)} nodes Ready, {total:.1f}s from the start")
    return up.info
