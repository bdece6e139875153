"""What kwokctl hands each control-plane component beyond its own options: extra flags and environment
(componentsPatches), and the loopback ports they listen on."""

from __future__ import annotations

import os
import socket

from conformance.cluster.gates import format_gates
from conformance.cluster.providers.local.scheduler import CLIENT_RATE, _selftest_scheduler_gates

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")


# The Go garbage collector's target for every component: 400 (default 100) lets each heap grow to five times its live
# size before a collection. Measured with `dra-conformance bench` (idle, 2 cores): the control plane's CPU seconds
# to Ready 4.9 -> 4.1, bring-up 4.6 -> 4.3 s median; the price is memory (kube-apiserver's RSS about +90 MiB).
GOGC = "400"
# Another GOGC for every component (`make scale` measures the components' memory as a real cluster runs them: 100).
GOGC_ENV = "DRA_CONFORMANCE_GOGC"


def component_patches(scheduler_verbosity: int | None = None) -> list[dict]:
    """Flags kwokctl has no option for: no leader election in kube-controller-manager (one instance), etcd without
    fsync (a throw-away cluster: the bootstrap writes of kube-apiserver need not wait for the disk), GOGC,
    kube-scheduler's verbosity when asked (--scheduler-verbosity) and, for a selftest, kube-scheduler's own gates
    (SELFTEST_SCHEDULER_GATES_ENV)."""

    def args(**values: str) -> list[dict]:
        return [{"key": key.replace("_", "-"), "value": value} for key, value in values.items()]

    extra_args = {
        "kube-controller-manager": args(
            leader_elect="false", kube_api_qps=str(CLIENT_RATE["qps"]), kube_api_burst=str(CLIENT_RATE["burst"])
        ),
        "etcd": args(unsafe_no_fsync="true"),
    }
    scheduler_args: dict[str, str] = {}
    if scheduler_gates := _selftest_scheduler_gates():
        scheduler_args["feature_gates"] = format_gates(scheduler_gates)
    if scheduler_verbosity is not None:
        scheduler_args["v"] = str(scheduler_verbosity)
    if scheduler_args:
        extra_args["kube-scheduler"] = args(**scheduler_args)
    gogc = [{"name": "GOGC", "value": os.environ.get(GOGC_ENV, GOGC)}]
    return [{"name": name, "extraArgs": extra_args.get(name, []), "extraEnvs": gogc} for name in COMPONENTS]


PORT_OPTIONS = (
    "kubeApiserverPort",
    "etcdPort",
    "etcdPeerPort",
    "kubeControllerManagerPort",
    "kubeSchedulerPort",
    "kwokControllerPort",
)


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports chosen by the kernel (all held open until every one is picked)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
