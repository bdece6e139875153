"""LocalProvider: start a kwokctl binary-runtime cluster, follow it until every component is ready, delete it."""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml

from conformance.cluster.audit import POLICY as AUDIT_POLICY
from conformance.cluster.client import Cluster
from conformance.cluster.gates import binary_gates, gates_to_enable
from conformance.cluster.interrupts import shielded
from conformance.cluster.nodes import create_nodes, wait_nodes_ready
from conformance.cluster.providers.base import ClusterInfo, ClusterSpec, Crash, ProviderNotReady
from conformance.cluster.providers.existing import mark_test_cluster
from conformance.cluster.providers.local.components import COMPONENTS, PORT_OPTIONS, component_patches, free_ports
from conformance.cluster.providers.local.processes import (
    GONE_GRACE_S,
    _env,
    _print,
    _running,
    clusters_root,
    delete_cluster,
)
from conformance.cluster.providers.local.restart import CommandLine, Restarter, wait_component_ready
from conformance.cluster.providers.local.scheduler import (
    _selftest_scheduler_gates,
    _selftest_scheduler_timeout,
    scheduler_config,
)
from conformance.cluster.providers.local.watchdog import Watchdog
from conformance.cluster.readiness import https_get, inline_kubeconfig, side_by_side, warm_client_imports
from conformance.cluster.toolchain.build import Binaries, ensure_binaries
from conformance.cluster.toolchain.gobuild import Progress
from conformance.cluster.waits import Cancelled, wait_for

READY_TIMEOUT_S = 60.0
# kube-controller-manager controllers the suite depends on (default ServiceAccounts, claim templates, clean-up);
# its /healthz lists a controller once it has started.
REQUIRED_CONTROLLERS = ("serviceaccount-controller", "resourceclaim-controller", "namespace-controller")
# Phases of a bring-up, in seconds from its start (LocalProvider.timings); they overlap after apiserver_ready.
PHASES = (
    "kwokctl_install_s",
    "apiserver_ready_s",
    "nodes_ready_s",
    "scheduler_ready_s",
    "controller_manager_ready_s",
    "components_started_s",
    "bring_up_s",
)
# Fast polls where no watch exists (a component's health endpoint): a start-up is over in a few seconds.
PROBE_INTERVAL_S = 0.05
PROBE_MAX_INTERVAL_S = 0.2
APISERVER_NOT_YET = "failed to wait for apiserver being healthy"
MAX_REVIVALS = 3
NEVER = threading.Event()


def phase_summary(timings: dict[str, float]) -> str:
    """`install 0.4, apiserver 2.1, ...`: when each phase ended, in seconds from the start, in that order."""
    ended = sorted((t, p) for p, t in timings.items() if p in PHASES and p != "bring_up_s")
    return ", ".join(f"{p.removesuffix('_s').removesuffix('_ready')} {t:.2f}" for t, p in ended)


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
        self._ports: dict[str, int] = {}
        self._kwokctl_lock = threading.Lock()
        self._revived: list[str] = []
        self._children: list[subprocess.Popen[bytes]] = []
        self._restarter: Restarter | None = None
        self._watchdog: Watchdog | None = None
        self._info: ClusterInfo | None = None

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

        actual = _selftest_scheduler_timeout(timeout, {**gates, **_selftest_scheduler_gates()})
        (self.workdir / "scheduler.yaml").write_text(yaml.safe_dump(scheduler_config(actual, local=True)))
        if spec.audit:
            (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        (self.workdir / "kwokctl.yaml").write_text(yaml.safe_dump(self._kwokctl_config(binaries, gates, spec)))
        self._started = time.monotonic()
        warm_client_imports()  # while kwokctl and the apiserver start
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
            f"cluster {self.cluster_name} ready in {self.timings['bring_up_s']:.1f}s ({phase_summary(self.timings)}; "
            f"kubeconfig: {info.kubeconfig})"
        )
        self._info = info
        if spec.watch_components:
            workdir = self.workdir
            # The run keeps the cluster folder's logs in its artefacts (session/cluster.py); the folder itself goes.
            label = lambda log: f"artefacts/control-plane/{log.relative_to(workdir)}"  # noqa: E731
            self._watchdog = Watchdog(self._state(), self._restart_crashed, self.progress, log_label=label)
            self._watchdog.start()
        return info

    # -- the control plane's watch (watchdog.py) ----------------------------------------------------------------
    def crashes(self) -> list[Crash] | None:
        """The components that exited on their own so far (None: not watched, e.g. the lifecycle runs)."""
        if self._watchdog is None:
            return None
        self._watchdog.check()
        return list(self._watchdog.crashes)

    def _restart_crashed(self, name: str, why: str) -> None:
        assert self._info is not None
        self._restart(self._info, name, lambda line: line, why)

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
        """Start kwokctl and follow the cluster while kwokctl is still at work: kwokctl ends once the apiserver
        serves /version, and is stopped once it has forked every component; readiness (ours) is watched from the
        moment its configuration is written."""
        assert self.workdir is not None and self.cluster_name is not None
        release = spec.version.release
        for phase in PHASES:  # a retry measures afresh
            self.timings.pop(phase, None)
        proc, log = self._spawn_kwokctl()
        try:
            state = self._state()
            wait_for(
                lambda: self._check_kwokctl(proc, log) or (state / "kubeconfig.yaml").exists(),
                bool,
                timeout=READY_TIMEOUT_S,
                expected=f"kwokctl to write {state / 'kubeconfig.yaml'}",
                interval=PROBE_INTERVAL_S,
                max_interval=PROBE_MAX_INTERVAL_S,
            )
            self._mark("kwokctl_install_s")
            kubeconfig = self.workdir / "kubeconfig"
            kubeconfig.write_text(inline_kubeconfig(state / "kubeconfig.yaml"))
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
                scheduler_endpoint=f"https://127.0.0.1:{self._ports['kubeSchedulerPort']}",
                source=binaries.source,
                audit_log=state / "logs" / "audit.log" if spec.audit else None,
            )
            self._wait_ready(info, proc, log)
            return info
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def _state(self) -> Path:
        assert self.workdir is not None and self.cluster_name is not None
        return self.workdir / "kwok" / "clusters" / self.cluster_name

    def _spawn_kwokctl(self) -> tuple[subprocess.Popen[bytes], Path]:
        """Start `kwokctl create cluster` (it writes the configuration, forks the components and waits for
        /version)."""
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
        return proc, log

    def _check_kwokctl(self, proc: subprocess.Popen[bytes], log: Path) -> bool:
        """Fail at once when kwokctl failed or a component died; True once kwokctl's part is over.

        kwokctl's part is over when it has forked every component (detached, each in its own session): what it
        does then is wait for /version by running kubectl every 200 ms, CPU that the starting apiserver needs on
        a busy machine. It is stopped there; our own readiness checks are stricter.
        """
        self._check_components_alive()
        with self._kwokctl_lock:
            if "components_started_s" in self.timings:
                return True
            code = proc.poll()
            if code is None and not self._all_forked():
                return False
            if code is None:
                proc.kill()
                proc.wait()
            elif code != 0:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                raise ProviderNotReady(f"`kwokctl create cluster` failed (exit {code}):\n{tail}")
            self._mark("components_started_s")
            return True

    def _all_forked(self) -> bool:
        pids = self._state() / "pids"
        return all((pids / f"{name}.pid").exists() for name in COMPONENTS)

    def _kwokctl_config(self, binaries: Binaries, gates: dict[str, bool], spec: ClusterSpec) -> dict:
        options: dict = {
            "bindAddress": "127.0.0.1",
            "kubeVersion": spec.version.tag,
            "kubeFeatureGates": ",".join(f"{k}={str(v).lower()}" for k, v in gates.items()),
            "kubeAuthorization": True,
            "kubeSchedulerConfig": str(self.workdir / "scheduler.yaml"),
            "disableQPSLimits": True,
        }
        if spec.audit:  # kwokctl passes it as --audit-policy-file and logs to <cluster>/logs/audit.log
            options["kubeAuditPolicy"] = str(self.workdir / "audit-policy.yaml")
        # Ports from the kernel's ephemeral range, not kwokctl's probing from 32766 down: clusters started at
        # the same moment would otherwise pick the same ones.
        self._ports = dict(zip(PORT_OPTIONS, free_ports(len(PORT_OPTIONS)), strict=True))
        options.update(self._ports)
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
        return {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": options,
            "componentsPatches": component_patches(spec.scheduler_verbosity),
        }

    def _wait_ready(self, info: ClusterInfo, proc: subprocess.Popen[bytes], log: Path) -> None:
        """kube-apiserver /readyz; then, side by side: the nodes Ready (created at once, followed by watch),
        kube-scheduler /readyz and kube-controller-manager /healthz with the controllers the suite needs."""
        cluster = Cluster(info)
        ports = self._ports

        def probe(observe: Callable[[], str], ok: Callable[[str], bool], expected: str, stop: threading.Event) -> None:
            def checked() -> str:
                if stop.is_set():
                    raise Cancelled(f"stopped while waiting for {expected}")
                self._check_kwokctl(proc, log)
                return observe()

            wait_for(
                checked,
                ok,
                timeout=READY_TIMEOUT_S,
                expected=expected,
                describe=lambda body: (body or "")[-300:],
                interval=PROBE_INTERVAL_S,
                max_interval=PROBE_MAX_INTERVAL_S,
            )

        try:
            probe(lambda: cluster.raw_get("/readyz"), lambda b: b.strip() == "ok", "kube-apiserver /readyz", NEVER)
            self._mark("apiserver_ready_s")
            # kube-system is made by the apiserver's bootstrap controller a moment after it is ready.
            wait_for(
                lambda: mark_test_cluster(cluster.core, self.name) or True,
                bool,
                timeout=READY_TIMEOUT_S,
                expected="the test-cluster marker ConfigMap to be created in kube-system",
                interval=PROBE_INTERVAL_S,
                max_interval=PROBE_MAX_INTERVAL_S,
            )
            create_nodes(cluster.core, info.nodes)
            scheduler = f"https://127.0.0.1:{ports['kubeSchedulerPort']}/readyz"
            manager = f"https://127.0.0.1:{ports['kubeControllerManagerPort']}/healthz?verbose"
            ended = side_by_side(
                {
                    "nodes_ready_s": lambda stop: wait_nodes_ready(
                        cluster.core, [n.name for n in info.nodes], READY_TIMEOUT_S, stop
                    ),
                    "scheduler_ready_s": lambda stop: probe(
                        lambda: https_get(scheduler), lambda b: b.strip() == "ok", f"kube-scheduler {scheduler}", stop
                    ),
                    "controller_manager_ready_s": lambda stop: probe(
                        lambda: https_get(manager),
                        lambda b: "healthz check passed" in b and all(f"]{c} ok" in b for c in REQUIRED_CONTROLLERS),
                        f"kube-controller-manager {manager} with {', '.join(REQUIRED_CONTROLLERS)} started",
                        stop,
                    ),
                },
                since=self._started,
            )
            self.timings.update(ended)
        finally:
            cluster.close()

    def _mark(self, phase: str) -> None:
        """Seconds from the start of bring-up to the end of `phase`."""
        self.timings[phase] = time.monotonic() - self._started

    def _check_components_alive(self) -> None:
        """Fail at once, with its log, when a component exited (a bad flag or config), instead of at a deadline.

        One exit is expected on a busy machine and undone: kube-controller-manager gives up when kube-apiserver is
        not healthy within 10 s of its own start (fixed in its code). With leader election it only got there once
        it held a lease, that is once the apiserver answered; without, it starts at once. It is started again.
        """
        assert self.workdir is not None and self.cluster_name is not None
        state = self._state()
        for pidfile in sorted((state / "pids").glob("*.pid")):
            pid = pidfile.read_text().strip()
            if pid.isdigit() and not _running(int(pid)):
                log = state / "logs" / f"{pidfile.stem}.log"
                text = log.read_text(errors="replace") if log.exists() else ""
                if pidfile.stem == "kube-controller-manager" and APISERVER_NOT_YET in text and self._revive(pidfile):
                    continue
                tail = "\n".join(text.splitlines()[-20:]) if text else "(no log)"
                raise ProviderNotReady(f"{pidfile.stem} exited during start-up; last lines of {log}:\n{tail}")

    def _revive(self, pidfile: Path) -> bool:
        """Start a component again with kwokctl's command line for it; False once it was revived too often."""
        with self._kwokctl_lock:
            if self._revived.count(pidfile.stem) >= MAX_REVIVALS:
                return False
            config = next(
                d
                for d in yaml.safe_load_all((self._state() / "kwok.yaml").read_text())
                if d and d.get("kind") == "KwokctlConfiguration"
            )
            component = next(c for c in config["components"] if c["name"] == pidfile.stem)
            log = self._state() / "logs" / f"{pidfile.stem}.log"
            with log.open("a") as out:
                proc = subprocess.Popen(
                    [component["binary"], *component.get("args", [])],
                    cwd=component.get("workDir"),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # detached like kwokctl's own: `kwokctl delete` finds it by its pid file
                )
            pidfile.write_text(str(proc.pid))
            self._revived.append(pidfile.stem)
            self._children.append(proc)
            self.progress(f"{pidfile.stem} gave up waiting for the apiserver (busy machine); started it again")
            return True

    # -- restart in place (dra-conformance lifecycle) -------------------------------------------------------
    def restart_component(
        self, info: ClusterInfo, name: str, edit: Callable[[CommandLine], CommandLine], why: str
    ) -> CommandLine:
        """Restart kube-apiserver, kube-scheduler or kube-controller-manager with `edit(its current command line)`
        (other gates, binary or configuration: restart.py) and wait until it is ready again."""
        if self._watchdog is None:
            return self._restart(info, name, edit, why)
        with self._watchdog.paused(name):
            return self._restart(info, name, edit, why)

    def _restart(
        self, info: ClusterInfo, name: str, edit: Callable[[CommandLine], CommandLine], why: str
    ) -> CommandLine:
        if self._restarter is None:
            self._restarter = Restarter.of(self._state(), self._children)

        def apiserver_ready() -> str:
            cluster = Cluster(info)
            try:
                return cluster.raw_get("/readyz")
            finally:
                cluster.close()

        return self._restarter.restart(
            name, edit, lambda: wait_component_ready(name, apiserver_ready, self._ports), why
        )

    def command_line(self, name: str) -> CommandLine:
        """What `name` runs now (as kwokctl started it, or as its last restart_component edited it)."""
        if self._restarter is None:
            self._restarter = Restarter.of(self._state(), self._children)
        return self._restarter.lines[name]

    # -- stop ----------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Delete the cluster (shielded from interrupts: a cluster is never left half-deleted)."""
        with shielded():
            self._stop()

    def _stop(self) -> None:
        if self._watchdog is not None:  # before anything is stopped on purpose
            self._watchdog.stop()
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
        for child in self._children:  # components this process started again: reap them (killed by now)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(GONE_GRACE_S)
        self.timings["teardown_s"] = time.monotonic() - started
        self.progress(f"cluster {self.cluster_name} removed in {self.timings['teardown_s']:.1f}s")
