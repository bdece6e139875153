"""The embedded default: real control-plane binaries run as local processes by `kwokctl --runtime binary`.

kube-apiserver, kube-controller-manager, kube-scheduler and etcd are the real binaries from the cache; nodes
are simulated by the kwok controller. Everything listens on 127.0.0.1 on ports kwokctl picks free, and all
state lives in one folder per cluster, so several clusters can run side by side and the user's
~/.kube/config and ~/.kwok are never touched.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.gates import binary_gates, gates_to_enable
from conformance.cluster.nodes import create_nodes, wait_nodes_ready
from conformance.cluster.providers.base import ClusterInfo, ClusterSpec, ProviderNotReady
from conformance.cluster.providers.existing import mark_test_cluster
from conformance.cluster.toolchain.build import Binaries, ensure_binaries
from conformance.cluster.toolchain.gobuild import Progress
from conformance.cluster.waits import wait_for

READY_TIMEOUT_S = 60.0
CONTROL_PLANE_LEASES = ("kube-scheduler", "kube-controller-manager")


def clusters_root() -> Path:
    return Path(tempfile.gettempdir()) / "dra-conformance-clusters"


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def scheduler_config(binding_timeout_s: int | None) -> dict:
    """A KubeSchedulerConfiguration; bindingTimeout only where the release has it (1.35+)."""
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
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}


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


def leftover_processes(marker: str) -> list[tuple[int, str]]:
    """Processes whose command line mentions `marker` (a cluster's own folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append((int(proc.name), cmd.strip()))
    return found


class LocalProvider:
    """Starts and stops one kwokctl binary-runtime cluster."""

    name = "local"

    def __init__(self, *, download: bool = False, progress: Progress = _print) -> None:
        # download=True lets kwokctl fetch official release binaries itself (needs the release sites).
        self.download = download
        self.progress = progress
        self.cluster_name: str | None = None
        self.workdir: Path | None = None
        self.kwokctl: Path | None = None
        self.keep = False
        self.timings: dict[str, float] = {}
        self._started = 0.0

    # -- start ---------------------------------------------------------------------------------------------
    def start(self, spec: ClusterSpec) -> ClusterInfo:
        binaries = ensure_binaries(spec.version, progress=self.progress)
        # The cached kubectl of this version first on PATH, for the run and every process it starts.
        os.environ["PATH"] = f"{binaries.kubectl.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        gates = {**gates_to_enable(binary_gates(binaries.kube["kube-apiserver"])), **spec.feature_gates}
        release = spec.version.release
        # Gates absent from `gates` are GA, hence on. bindingTimeout with the gate off is a scheduler config error.
        conditions_on = gates.get("DRADeviceBindingConditions", True)
        timeout = spec.binding_timeout_s if release.binding_timeout_configurable and conditions_on else None

        self.cluster_name = spec.name or f"dra-{uuid.uuid4().hex[:8]}"
        self.workdir = clusters_root() / self.cluster_name
        if self.workdir.exists():
            raise ProviderNotReady(
                f"cluster {self.cluster_name!r} exists already at {self.workdir}; "
                f"remove it with `dra-conformance cluster down {self.cluster_name}`"
            )
        self.workdir.mkdir(parents=True)
        self.kwokctl = binaries.kwokctl
        (self.workdir / "kwokctl").symlink_to(binaries.kwokctl)  # lets `cluster down` work from the folder alone
        self.keep = spec.keep
        atexit.register(self.stop)

        (self.workdir / "scheduler.yaml").write_text(yaml.safe_dump(scheduler_config(timeout)))
        (self.workdir / "kwokctl.yaml").write_text(yaml.safe_dump(self._kwokctl_config(binaries, gates, spec)))
        self._started = time.monotonic()
        self.progress(
            f"starting local cluster {self.cluster_name} (Kubernetes {spec.version}, {len(spec.nodes)} kwok nodes)"
        )
        try:
            info = self._bring_up(spec, binaries, gates, timeout)
        except BaseException:
            self.keep = False  # a half-started cluster is never worth keeping
            self.stop()
            raise
        self._mark("bring_up_s")
        self.progress(
            f"cluster {self.cluster_name} ready in {self.timings['bring_up_s']:.1f}s (kubeconfig: {info.kubeconfig})"
        )
        return info

    def _bring_up(
        self, spec: ClusterSpec, binaries: Binaries, gates: dict[str, bool], timeout: int | None, attempts: int = 3
    ) -> ClusterInfo:
        """Create and wait for readiness; again when a port was taken by a cluster starting at the same moment.

        kwokctl picks free ports by probing, so clusters created at once can pick the same one; the loser's
        component dies with "address already in use". Other failures are not retried.
        """
        assert self.workdir is not None and self.cluster_name is not None
        for attempt in range(1, attempts + 1):
            try:
                return self._bring_up_once(spec, binaries, gates, timeout)
            except ProviderNotReady as exc:
                if "address already in use" not in str(exc) or attempt == attempts:
                    raise
                self.progress(f"a port was taken by another cluster starting at the same time; retry {attempt}")
                delete_cluster(self.cluster_name, self.workdir, self.kwokctl, keep_folder=True)
        raise AssertionError("unreachable")

    def _bring_up_once(
        self, spec: ClusterSpec, binaries: Binaries, gates: dict[str, bool], timeout: int | None
    ) -> ClusterInfo:
        assert self.workdir is not None and self.cluster_name is not None
        release = spec.version.release
        self._create()
        self._mark("kwokctl_create_s")
        kubeconfig = self.workdir / "kubeconfig"
        kubeconfig.write_text(self._kwokctl("get", "kubeconfig"))
        info = ClusterInfo(
            name=self.cluster_name,
            provider=self.name,
            kubeconfig=kubeconfig,
            version=str(spec.version),
            feature_gates=gates,
            binding_timeout_s=timeout or release.fixed_binding_timeout_seconds,
            binding_timeout_configurable=release.binding_timeout_configurable,
            nodes=spec.nodes,
            kubectl=binaries.kubectl,
        )
        self._wait_ready(info)
        return info

    def _create(self) -> None:
        """Run `kwokctl create cluster`, watching the components: one that dies fails the start at once."""
        assert self.workdir is not None and self.kwokctl is not None and self.cluster_name is not None
        config = str(self.workdir / "kwokctl.yaml")
        # An empty --kubeconfig keeps ~/.kube/config untouched; --timeout bounds kwokctl's own waiting.
        cmd = [
            str(self.kwokctl),
            "--name",
            self.cluster_name,
            "--config",
            config,
            "create",
            "cluster",
            "--runtime",
            "binary",
            "--kubeconfig",
            "",
            "--timeout",
            "60s",
        ]
        log = self.workdir / "kwokctl-create.log"
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, env=_env(self.workdir), stdout=out, stderr=subprocess.STDOUT)
            try:
                while True:
                    try:
                        code = proc.wait(timeout=0.25)
                        break
                    except subprocess.TimeoutExpired:
                        self._check_components_alive()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        if code != 0:
            self._check_components_alive()
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise ProviderNotReady(f"`kwokctl create cluster` failed (exit {code}):\n{tail}")

    def _kwokctl_config(self, binaries: Binaries, gates: dict[str, bool], spec: ClusterSpec) -> dict:
        options: dict = {
            "bindAddress": "127.0.0.1",
            "kubeVersion": spec.version.tag,
            "kubeFeatureGates": ",".join(f"{k}={str(v).lower()}" for k, v in gates.items()),
            "kubeAuthorization": True,
            "kubeSchedulerConfig": str(self.workdir / "scheduler.yaml"),
            "disableQPSLimits": True,
        }
        # Ports from the kernel's ephemeral range, not kwokctl's probing from 32766 down: clusters started at
        # the same moment would otherwise pick the same ones.
        options.update(zip(PORT_OPTIONS, free_ports(len(PORT_OPTIONS)), strict=True))
        if runtime_config := spec.version.release.runtime_config:
            options["kubeRuntimeConfig"] = runtime_config
        if not self.download:
            options.update(
                kubeApiserverBinary=str(binaries.kube["kube-apiserver"]),
                kubeControllerManagerBinary=str(binaries.kube["kube-controller-manager"]),
                kubeSchedulerBinary=str(binaries.kube["kube-scheduler"]),
                kubectlBinary=str(binaries.kubectl),
                etcdBinary=str(binaries.etcd),
                kwokControllerBinary=str(binaries.kwok),
            )
        return {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokctlConfiguration", "options": options}

    def _wait_ready(self, info: ClusterInfo) -> None:
        cluster = Cluster(info)
        try:

            def readyz() -> str:
                self._check_components_alive()
                return cluster.raw_get("/readyz")

            wait_for(
                readyz,
                lambda body: body.strip() == "ok",
                timeout=READY_TIMEOUT_S,
                expected="kube-apiserver /readyz to answer ok",
            )
            self._mark("apiserver_ready_s")
            coordination = client.CoordinationV1Api(cluster.api)

            def leases() -> set[str]:
                self._check_components_alive()
                return {lease.metadata.name for lease in coordination.list_namespaced_lease("kube-system").items}

            wait_for(
                leases,
                lambda names: set(CONTROL_PLANE_LEASES) <= names,
                timeout=READY_TIMEOUT_S,
                expected=f"leader leases of {CONTROL_PLANE_LEASES} (scheduler and controller manager running)",
            )
            self._mark("control_plane_ready_s")
            mark_test_cluster(cluster.core, self.name)
            create_nodes(cluster.core, info.nodes)
            wait_nodes_ready(cluster.core, [n.name for n in info.nodes], READY_TIMEOUT_S)
        finally:
            cluster.close()

    def _mark(self, phase: str) -> None:
        """Seconds from the start of bring-up to the end of `phase`."""
        self.timings[phase] = time.monotonic() - self._started

    def _check_components_alive(self) -> None:
        """Fail at once, with its log, when a component exited (a bad flag or config), instead of at a deadline."""
        assert self.workdir is not None and self.cluster_name is not None
        state = self.workdir / "kwok" / "clusters" / self.cluster_name
        for pidfile in sorted((state / "pids").glob("*.pid")):
            pid = pidfile.read_text().strip()
            if pid.isdigit() and not _running(int(pid)):
                log = state / "logs" / f"{pidfile.stem}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.exists() else "(no log)"
                raise ProviderNotReady(f"{pidfile.stem} exited during start-up; last lines of {log}:\n{tail}")

    # -- stop ----------------------------------------------------------------------------------------------
    def stop(self) -> None:
        if self.workdir is None or not self.workdir.exists():
            return
        if self.keep:
            self.progress(
                f"keeping cluster {self.cluster_name}: KUBECONFIG={self.workdir / 'kubeconfig'}; "
                f"remove it with `dra-conformance cluster down {self.cluster_name}`"
            )
            return
        started = time.monotonic()
        delete_cluster(self.cluster_name, self.workdir, self.kwokctl)
        self.timings["teardown_s"] = time.monotonic() - started
        self.progress(f"cluster {self.cluster_name} removed in {self.timings['teardown_s']:.1f}s")

    def _kwokctl(self, *args: str) -> str:
        assert self.workdir is not None and self.kwokctl is not None and self.cluster_name is not None
        return run_kwokctl(self.kwokctl, self.workdir, self.cluster_name, *args)


def _running(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped by kwokctl) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kwokctl_of(workdir: Path) -> Path | None:
    link = workdir / "kwokctl"
    return link.resolve() if link.exists() else None


def _env(workdir: Path) -> dict[str, str]:
    # KWOK_WORKDIR keeps all cluster state (pids, certs, logs) inside the cluster's own folder.
    return dict(os.environ, KWOK_WORKDIR=str(workdir / "kwok"))


def run_kwokctl(kwokctl: Path, workdir: Path, name: str, *args: str) -> str:
    cmd = [str(kwokctl), "--name", name, *args]
    proc = subprocess.run(cmd, env=_env(workdir), capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise ProviderNotReady(
            f"`kwokctl {' '.join(args[:3])}` failed (exit {proc.returncode}):\n"
            f"{proc.stderr.strip()[-4000:]}\nlogs: {workdir / 'kwok'}"
        )
    return proc.stdout


def delete_cluster(name: str, workdir: Path, kwokctl: Path | None, *, keep_folder: bool = False) -> None:
    """Delete a cluster and its folder; kill anything of it that survives (never leave processes behind).

    keep_folder keeps the suite's own files (configs) and removes only kwokctl's state, for a retry.
    """
    if kwokctl is not None and (workdir / "kwok").exists():
        try:
            run_kwokctl(kwokctl, workdir, name, "delete", "cluster")
        except (ProviderNotReady, subprocess.TimeoutExpired) as exc:
            _print(f"warning: kwokctl delete of {name} failed, killing its processes: {exc}")
    for pid, cmd in leftover_processes(str(workdir)):
        _print(f"warning: killing leftover process {pid} of cluster {name}: {cmd[:120]}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(workdir / "kwok" if keep_folder else workdir, ignore_errors=True)
