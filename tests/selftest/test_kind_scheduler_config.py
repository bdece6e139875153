"""The scheduler config the kind control plane mounts, given to the real kube-scheduler against a real apiserver.

kubeadm starts kube-scheduler with --kubeconfig=/etc/kubernetes/scheduler.conf and, through the kind config's patch,
--config: the file then replaces the flag, so a config without clientConnection.kubeconfig leaves the scheduler with
no apiserver ("invalid configuration: no configuration has been provided") and kubeadm waits 4 minutes for nothing.
Here the cached kube-scheduler of the release runs with the generated file against the local provider's apiserver:
only the kubeconfig path is pointed at that cluster's (the node's /etc/kubernetes does not exist on the host), and
the scheduler must come up: take kind's leader lease (leader election is on, as kubeadm runs it) and answer /readyz.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.kind.config import SCHEDULER_KUBECONFIG_IN_NODE, scheduler_file
from conformance.cluster.providers.local import CLIENT_RATE, free_ports
from conformance.cluster.readiness import https_get
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.versions import KubeVersion
from conformance.cluster.waits import wait_for

START_TIMEOUT_S = 60.0
LEASE = "kube-scheduler"  # kube-scheduler's default leader-election lock, in kube-system


@pytest.fixture
def kind_scheduler(cluster: Cluster, k8s_version: KubeVersion, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    generated = yaml.safe_load(scheduler_file(k8s_version, 20))
    assert generated["clientConnection"]["kubeconfig"] == SCHEDULER_KUBECONFIG_IN_NODE, generated
    generated["clientConnection"]["kubeconfig"] = str(cluster.info.kubeconfig)
    config = tmp_path / "scheduler-config.yaml"
    config.write_text(yaml.safe_dump(generated))
    (port,) = free_ports(1)
    scheduler = ensure_binaries(k8s_version).kube["kube-scheduler"]
    gates = ",".join(f"{name}=true" for name in k8s_version.release.gates)
    log = (tmp_path / "kube-scheduler.log").open("wb")
    cmd = [str(scheduler), f"--config={config}", f"--secure-port={port}", "--bind-address=127.0.0.1"]
    proc = subprocess.Popen(cmd + ([f"--feature-gates={gates}"] if gates else []), stdout=log, stderr=log)
    proc.port = port  # type: ignore[attr-defined]
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    client.CoordinationV1Api(cluster.api).delete_namespaced_lease(LEASE, "kube-system")


def test_kube_scheduler_comes_up_with_the_kind_scheduler_config(
    cluster: Cluster, kind_scheduler: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    generated = yaml.safe_load((tmp_path / "scheduler-config.yaml").read_text())
    assert {k: generated["clientConnection"][k] for k in CLIENT_RATE} == CLIENT_RATE

    def state() -> tuple[int | None, str, str]:
        holder = ""
        leases = client.CoordinationV1Api(cluster.api)
        lease = leases.list_namespaced_lease("kube-system", field_selector=f"metadata.name={LEASE}")
        if lease.items:
            holder = lease.items[0].spec.holder_identity or ""
        try:
            ready = https_get(f"https://127.0.0.1:{kind_scheduler.port}/readyz")  # type: ignore[attr-defined]
        except OSError as exc:
            ready = f"not ready: {exc}"
        return kind_scheduler.poll(), holder, ready

    def describe(seen: tuple[int | None, str, str] | None) -> str:
        log = (tmp_path / "kube-scheduler.log").read_text(errors="replace")[-3000:]
        return f"(exit status, lease holder, /readyz) = {seen}; kube-scheduler's log ends:\n{log}"

    exited, holder, ready = wait_for(
        state,
        lambda s: s[0] is not None or (bool(s[1]) and s[2] == "ok"),
        timeout=START_TIMEOUT_S,
        expected="kube-scheduler to hold its leader lease and answer /readyz ok",
        describe=describe,
    )
    assert exited is None, describe((exited, holder, ready))
