"""The embedded default: real control-plane binaries run as local processes by `kwokctl --runtime binary`.

kube-apiserver, kube-controller-manager, kube-scheduler and etcd are the real binaries from the cache; nodes
are simulated by the kwok controller. Everything listens on 127.0.0.1 on ports kwokctl picks free, and all
state lives in one folder per cluster, so several clusters can run side by side and the user's
~/.kube/config and ~/.kwok are never touched.

The pieces: scheduler.py (kube-scheduler's configuration and the selftest knobs), components.py (componentsPatches
and ports), processes.py (a cluster's folder and processes, deletion), provider.py (LocalProvider, which ties them).
Everything is importable from here, as it was from the single module this package replaced.
"""

from conformance.cluster.providers.local.components import (
    COMPONENTS,
    GOGC,
    PORT_OPTIONS,
    component_patches,
    free_ports,
)
from conformance.cluster.providers.local.processes import (
    DELETE_TIMEOUT_S,
    GONE_GRACE_S,
    clusters_root,
    delete_cluster,
    kwokctl_of,
    leftover_processes,
    run_kwokctl,
)
from conformance.cluster.providers.local.provider import (
    APISERVER_NOT_YET,
    MAX_REVIVALS,
    NEVER,
    PHASES,
    PROBE_INTERVAL_S,
    PROBE_MAX_INTERVAL_S,
    READY_TIMEOUT_S,
    REQUIRED_CONTROLLERS,
    LocalProvider,
    phase_summary,
)
from conformance.cluster.providers.local.scheduler import (
    CLIENT_RATE,
    NO_LEADER_ELECTION,
    SELFTEST_SCHEDULER_GATES_ENV,
    SELFTEST_SCHEDULER_TIMEOUT_ENV,
    _selftest_scheduler_gates,
    _selftest_scheduler_timeout,
    scheduler_config,
)

__all__ = [
    "APISERVER_NOT_YET",
    "CLIENT_RATE",
    "COMPONENTS",
    "DELETE_TIMEOUT_S",
    "GOGC",
    "GONE_GRACE_S",
    "MAX_REVIVALS",
    "NEVER",
    "NO_LEADER_ELECTION",
    "PHASES",
    "PORT_OPTIONS",
    "PROBE_INTERVAL_S",
    "PROBE_MAX_INTERVAL_S",
    "READY_TIMEOUT_S",
    "REQUIRED_CONTROLLERS",
    "SELFTEST_SCHEDULER_GATES_ENV",
    "SELFTEST_SCHEDULER_TIMEOUT_ENV",
    "LocalProvider",
    "_selftest_scheduler_gates",
    "_selftest_scheduler_timeout",
    "clusters_root",
    "component_patches",
    "delete_cluster",
    "free_ports",
    "kwokctl_of",
    "leftover_processes",
    "phase_summary",
    "run_kwokctl",
    "scheduler_config",
]
