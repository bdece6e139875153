"""What every cluster provider takes and gives: the cluster the suite asks for, and how to reach it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from conformance.cluster.toolchain.source import KubeSource
from conformance.cluster.versions import DEFAULT_VERSION, KubeVersion, parse_version

# Labels on the test nodes that scenarios select on (which fabric a node is cabled to).
FABRIC_LABEL = "conformance.dra.example.com/fabric"
NODE_ROLE_LABEL = "conformance.dra.example.com/node"
# Worker nodes when --nodes is not given. kwok nodes cost nothing, and with 8 the count-based scenarios that need a
# node to themselves (faults selected by node) run side by side, and IMP-8 stages its four steps for one restart
# (reference-counted: 153 s instead of 234 s at 4 nodes). kind nodes are containers: 4, as kind-config.yaml has.
LOCAL_NODES = 8
KIND_NODES = 4


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: dict[str, str]


def default_nodes(count: int, fabrics: int = 2) -> list[NodeSpec]:
    """`count` worker nodes spread round-robin over `fabrics` fabrics."""
    if count < 1 or fabrics < 1:
        raise ValueError(f"need at least one node and one fabric, got nodes={count} fabrics={fabrics}")
    return [
        NodeSpec(f"node-{i}", {FABRIC_LABEL: f"fabric-{i % fabrics}", NODE_ROLE_LABEL: "worker"}) for i in range(count)
    ]


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster a run asks for. binding_timeout_s is ignored where the release fixes it (1.34)."""

    version: KubeVersion = field(default_factory=lambda: parse_version(DEFAULT_VERSION))
    nodes: list[NodeSpec] = field(default_factory=lambda: default_nodes(LOCAL_NODES))
    binding_timeout_s: int = 20
    keep: bool = False
    name: str | None = None
    # Explicit gate values, applied over the ones the suite turns on (e.g. to see a run with the gate off).
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # kube-scheduler's log verbosity (--v) where the provider starts it (local); None: its default. Its log is
    # kept with the cluster (--keep-cluster), e.g. V(5) to read the DRA plugin's assume-cache and in-flight steps.
    scheduler_verbosity: int | None = None
    # kube-apiserver's audit log of service accounts' requests (cluster/audit.py), where the provider starts it: the
    # API server's refusals of the stack's accounts are a failure's cause. `make scale` measures without it.
    audit: bool = True
    # Watch the control-plane components while the run uses the cluster, restarting one that exited on its own as the
    # kubelet would (local provider: providers/local/watchdog.py); the lifecycle runs restart them deliberately.
    watch_components: bool = True


@dataclass(frozen=True)
class ClusterInfo:
    """A running cluster as the suite sees it."""

    name: str
    provider: str
    kubeconfig: Path
    version: str
    # Gates passed to the components; gates not named here have the release's defaults.
    feature_gates: dict[str, bool]
    # Seconds the scheduler waits in PreBind before "binding timeout".
    binding_timeout_s: int
    binding_timeout_configurable: bool
    nodes: list[NodeSpec]
    kubectl: Path | None = None
    # kube-scheduler's secure port (https://host:port) where the suite can reach it (local), for its /metrics and
    # /configz (conformance/cluster/running.py); None where it cannot (kind, an existing cluster).
    scheduler_endpoint: str | None = None
    # What the control plane was built from where the suite built it (release, patches and their hashes:
    # toolchain.source); None where it did not (an existing cluster, kind's own node image).
    source: KubeSource | None = None
    # kube-apiserver's audit log (cluster/audit.py: every service account's request) where the suite can read it
    # (the clusters it brings up); None where it cannot (an existing cluster).
    audit_log: Path | None = None

    @property
    def patched(self) -> bool:
        return self.source is not None and self.source.patched


@dataclass(frozen=True)
class Crash:
    """A control-plane component that exited on its own while the run used the cluster."""

    component: str
    at: float  # time.time() when the watch saw it gone
    cause: str  # the panic or fatal line of its log
    frame: str  # where it panicked (function and file:line), "" when the log shows no trace
    log: str  # its log file
    restarted: bool  # started again (False: it kept dying and was left down)

    def line(self) -> str:
        when = time.strftime("%H:%M:%S", time.gmtime(self.at))
        where = f" in {self.frame}" if self.frame else ""
        after = "started again" if self.restarted else "left down"
        return f"{self.component} exited at {when} UTC: {self.cause}{where}; {after} (log {self.log})"


class Provider(Protocol):
    name: str

    def start(self, spec: ClusterSpec) -> ClusterInfo: ...

    def stop(self) -> None:
        """Remove everything start() made, unless the spec asked to keep the cluster. Idempotent."""
        ...


class ProviderNotReady(RuntimeError):
    """The provider cannot give a cluster (missing tool, unfinished provider)."""
