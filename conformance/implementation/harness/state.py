"""What the harness holds for one run (the profile, the processes running, what it applied, ports, nodes, the
run CA) and the records and errors its phases share."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config

from conformance.implementation.nodefollow import NodeFollower, NodeSource
from conformance.implementation.profile import (
    LoadedProfile,
    Process,
)
from conformance.implementation.tls import RunCA


def instance_name(process: str, node: str | None) -> str:
    """A process's name, or NAME@NODE for an instance of a perNode process (its log, port file and pid file)."""
    return process if node is None else f"{process}@{node}"


class ImplementationFailed(RuntimeError):
    """A process of the implementation did not start, did not get ready, or exited badly."""


@dataclass
class _Running:
    spec: Process
    proc: subprocess.Popen[bytes]
    log: Path
    port: int | None = None
    node: str | None = None  # the node of a perNode process's instance

    @property
    def name(self) -> str:
        return instance_name(self.spec.name, self.node)

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class State:
    """The state of an Implementation; each phase of the harness (resolve.py, manifests.py, process.py, stop.py,
    nodes.py, start.py, restart.py) adds its methods on top of it, in that order."""

    loaded: LoadedProfile
    kubeconfig: Path
    workdir: Path
    progress: Callable[[str], None] = lambda _msg: None
    running: list[_Running] = field(default_factory=list)
    applied: list[tuple[Any, str, str | None]] = field(default_factory=list)
    _client: client.ApiClient | None = field(default=None, repr=False)
    restarts: int = 0
    # Every restart's window (time.time(): from before the kill until the process was ready again, or the restart
    # command's run): the suite had the stack down then (IMP-12 counts it out of detachSeconds).
    down: list[tuple[float, float]] = field(default_factory=list)
    # One restart at a time, never two kills of one process (restart scenarios run alone: suite/exclusive.py; this
    # guards the harness itself).
    _restarting: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _registered: list[str] = field(default_factory=list, repr=False)  # endpoint URLs as resolved at start
    _ports: dict[str, int] = field(default_factory=dict)  # {port} and {port:NAME} per instance, picked once per run
    # Where the scheduler placed the pod a central process's token is bound to ({pod_kubeconfig:NS/NAME} outside a
    # perNode process): NAMESPACE/NAME -> node (for the reports).
    placed: dict[str, str] = field(default_factory=dict)
    # Node hooks and perNode processes follow the cluster's nodes (None: a unit test's stand-in is not given, the
    # cluster is asked).
    nodes: NodeSource | None = None
    _nodes: set[str] = field(default_factory=set, repr=False)  # the nodes the per-node parts were started for
    _follower: NodeFollower | None = field(default=None, repr=False)
    _node_problems: list[str] = field(default_factory=list, repr=False)  # found on the follower's thread
    _holders: dict[str, list[tuple[str, str]]] = field(default_factory=dict, repr=False)  # node -> holder pods
    _ca: RunCA | None = field(default=None, repr=False)

    @property
    def ca(self) -> RunCA:
        if self._ca is None:
            self._ca = RunCA(self.workdir / "tls")
        return self._ca

    def _api(self) -> client.ApiClient:
        if self._client is None:
            self._client = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._client

    def _port_file(self, name: str) -> Path:
        return self.workdir / f"{name}.port"
