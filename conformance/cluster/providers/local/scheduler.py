"""kube-scheduler's configuration (the local cluster's and kind's), and the selftest-only knobs that make the
local scheduler run other settings than the cluster declares."""

from __future__ import annotations

import os

from conformance.cluster.gates import parse_gate_overrides

# One instance of each component: leader election would only add the wait for a lease (0.5 s or 3 s, bimodal).
NO_LEADER_ELECTION = {"leaderElect": False}
# The client-side rate limit of kube-scheduler (default 50/s, burst 100) and kube-controller-manager (20/s, burst 30),
# raised: at their defaults they, not binding conditions, set SCALE-1's pace (1000 pods bound in 78 s without any
# condition; 18 s with these). kwokctl already runs kube-apiserver without priority and fairness.
CLIENT_RATE = {"qps": 500, "burst": 1000}
# For selftests only (tests/selftest/test_declared_settings.py): a cluster that runs other settings than it declares.
# The scheduler is configured with this bindingTimeout (seconds) while the cluster still declares the asked one...
SELFTEST_SCHEDULER_TIMEOUT_ENV = "DRA_CONFORMANCE_SELFTEST_SCHEDULER_BINDING_TIMEOUT"
# ...and kube-scheduler alone gets these gates ("Name=false,..."), while the cluster declares the suite's own.
SELFTEST_SCHEDULER_GATES_ENV = "DRA_CONFORMANCE_SELFTEST_SCHEDULER_GATES"


def scheduler_config(binding_timeout_s: int | None, *, local: bool = False, kubeconfig: str | None = None) -> dict:
    """A KubeSchedulerConfiguration; bindingTimeout only where the release has it (1.35+). Client rate CLIENT_RATE
    everywhere. The local cluster runs one scheduler: no leader election. `kubeconfig` is where the scheduler finds
    its credentials: a config file replaces the --kubeconfig flag (kubeadm's), so without it kube-scheduler exits
    "no configuration has been provided" (kind: /etc/kubernetes/scheduler.conf)."""
    profile: dict = {"schedulerName": "default-scheduler"}
    if binding_timeout_s is not None:
        profile["pluginConfig"] = [
            {
                "name": "DynamicResources",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "DynamicResourcesArgs",
                    "bindingTimeout": f"{binding_timeout_s}s",
                },
            }
        ]
    config: dict = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    if local:
        config["leaderElection"] = NO_LEADER_ELECTION
    config["clientConnection"] = ({"kubeconfig": kubeconfig} if kubeconfig else {}) | CLIENT_RATE
    return {**config, "profiles": [profile]}


def _selftest_scheduler_gates() -> dict[str, bool]:
    return parse_gate_overrides(os.environ.get(SELFTEST_SCHEDULER_GATES_ENV, ""))


def _selftest_scheduler_timeout(declared: int | None, scheduler_gates: dict[str, bool]) -> int | None:
    """The bindingTimeout kube-scheduler is configured with: the declared one, unless a selftest asks for another
    (SELFTEST_SCHEDULER_TIMEOUT_ENV); none where the scheduler runs without binding conditions (a config error)."""
    if not scheduler_gates.get("DRADeviceBindingConditions", True):
        return None
    override = os.environ.get(SELFTEST_SCHEDULER_TIMEOUT_ENV)
    return int(override) if override and declared is not None else declared
