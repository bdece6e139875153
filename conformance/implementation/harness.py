"""Start and stop the implementation under test from its profile: processes, ports, readiness, logs."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from conformance.cluster.discovery import fresh_dynamic
from conformance.cluster.interrupts import shielded
from conformance.cluster.waits import CANCELLED, wait_for
from conformance.implementation import endpoints
from conformance.implementation.nodefollow import KubeNodes, NodeFollower, NodeSource
from conformance.implementation.profile import (
    NODE,
    PLACEHOLDER,
    PLAIN_PLACEHOLDERS,
    LoadedProfile,
    Process,
    ProfileError,
    Role,
    Scope,
    placeholder_problem,
)
from conformance.implementation.serviceaccount import (
    place_holder_pod,
    remove_holder_pod,
    service_account_kubeconfig,
)
from conformance.implementation.tls import RunCA

STOP_TIMEOUT_S = 15.0
_LOUD = re.compile(r"error|warn|exception|traceback|fail|abort|panic", re.IGNORECASE)
INTERRUPTED_STOP_TIMEOUT_S = 3.0  # an interrupted run ends in seconds: a process gets this long to exit cleanly
T = TypeVar("T")


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
class Implementation:
    """The processes of one profile, started in order against one cluster."""

    loaded: LoadedProfile
    kubeconfig: Path
    workdir: Path
    progress: Callable[[str], None] = lambda _msg: None
    running: list[_Running] = field(default_factory=list)
    applied: list[tuple[Any, str, str | None]] = field(default_factory=list)
    _client: client.ApiClient | None = field(default=None, repr=False)
    restarts: int = 0
    # One restart at a time, never two kills of one process (restart scenarios run alone: suite/exclusive.py; this
    # guards the harness itself).
    _restarting: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _registered: list[str] = field(default_factory=list, repr=False)  # endpoint URLs as resolved at start
    _ports: dict[str, int] = field(default_factory=dict)  # {port} per process (instance), picked once per run
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

    def _scope(self, process: Process | None, node: str | None) -> Scope:
        prof = self.loaded.profile
        return Scope(
            process=process,
            tls=frozenset(p.name for p in prof.processes if p.tls),
            per_node=node is not None,
            per_node_processes=frozenset(p.name for p in prof.processes if p.per_node),
        )

    def resolve(self, text: str, process: Process | None = None, node: str | None = None) -> str:
        """Fill the placeholders of a profile string (see conformance.implementation.profile.Process); `node`: the
        node a perNode process's instance or a node hook runs for ({node} is filled first, so that it may stand in
        another placeholder's argument, e.g. {pod_kubeconfig:ns/sa@{node}})."""
        scope = self._scope(process, node)
        if node is not None:
            text = text.replace(NODE, node)

        def fill(match: re.Match[str]) -> str:
            key, arg = match[1], match[2]
            problem = placeholder_problem(key, arg, scope)
            if problem:
                raise ProfileError(f"profile {self.loaded.path}: {match[0]} in {text!r}: {problem}")
            if key in PLAIN_PLACEHOLDERS:
                if key == "ca_file":
                    return str(self.ca.ensure_ca())
                return {
                    "kubeconfig": str(self.kubeconfig),
                    "workdir": str(self.workdir),
                    "bin": str(Path(sys.executable).parent),
                    "profile_dir": str(self.loaded.path.parent),
                }[key]
            if key == "port_file":
                assert process is not None
                return str(self._port_file(instance_name(process.name, node)))
            if key == "port":
                assert process is not None
                return str(self._port(instance_name(process.name, node)))
            assert arg is not None
            if key in ("url", "https_url", "hostport"):
                return self.address(key, arg, node)
            if key in ("tls_cert", "tls_key"):
                cert, private = self.ca.ensure_serving(arg)
                return str(cert if key == "tls_cert" else private)
            if key == "sa_kubeconfig":
                return str(self._sa_kubeconfig(*arg.split("/")))
            if key == "pod_kubeconfig":
                account, _, on = arg.partition("@")
                namespace, sa = account.split("/")
                return str(self._pod_kubeconfig(namespace, sa, on or str(node)))
            if arg not in os.environ:  # {env:NAME}
                raise ProfileError(f"profile {self.loaded.path}: {match[0]} in {text!r}: ${arg} is not set")
            return os.environ[arg]

        return PLACEHOLDER.sub(fill, text)

    def _port(self, name: str) -> int:
        """The port of process `name`, picked once per run: a restarted process comes back where the processes
        holding its {url:NAME} expect it. (Free when picked; the process binds it a moment later.)"""
        if name not in self._ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                self._ports[name] = sock.getsockname()[1]
        return self._ports[name]

    def url(self, name: str) -> str:
        return self.address("url", name, None)

    def address(self, key: str, name: str, node: str | None) -> str:
        """{url:NAME}, {https_url:NAME} or {hostport:NAME} of a running process (of a perNode one: its instance on
        `node`)."""
        for run in self.running:
            if run.spec.name == name and run.node == (node if run.spec.per_node else None) and run.port is not None:
                hostport = f"127.0.0.1:{run.port}"
                return {"url": f"http://{hostport}", "https_url": f"https://{hostport}", "hostport": hostport}[key]
        raise ProfileError(
            f"profile {self.loaded.path}: {{{key}:{name}}} needs an earlier process {name!r} with a port "
            f"({{port}} or portFile: true){f' on node {node}' if node else ''}"
        )

    def _api(self) -> client.ApiClient:
        if self._client is None:
            self._client = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._client

    def _sa_kubeconfig(self, namespace: str, name: str) -> Path:
        path = self.workdir / f"sa-{namespace}-{name}.kubeconfig"
        if not path.exists():
            service_account_kubeconfig(self.kubeconfig, client.CoreV1Api(self._api()), namespace, name, path)
        return path

    def _pod_kubeconfig(self, namespace: str, sa: str, node: str) -> Path:
        """A kubeconfig whose token is bound to a pod of `sa` the harness places on `node` (made once per node)."""
        path = self.workdir / f"pod-{namespace}-{sa}@{node}.kubeconfig"
        if not path.exists():
            core = client.CoreV1Api(self._api())
            ref = place_holder_pod(core, namespace, sa, node)
            self._holders.setdefault(node, []).append((namespace, ref["name"]))
            service_account_kubeconfig(self.kubeconfig, core, namespace, sa, path, bound_to=ref)
            self.progress(f"pod {namespace}/{ref['name']} on {node} holds the token of {path.name}")
        return path

    def _remove_holders(self, node: str) -> list[str]:
        """Delete the pods that held `node`'s tokens (their tokens stop working) and forget the kubeconfigs."""
        problems = []
        for namespace, name in self._holders.pop(node, []):
            problem = remove_holder_pod(client.CoreV1Api(self._api()), namespace, name)
            problems += [problem] if problem else []
        for path in self.workdir.glob(f"pod-*@{node}.kubeconfig"):
            path.unlink(missing_ok=True)
        return problems

    def _apply_manifests(self) -> None:
        if not self.loaded.profile.manifests:
            return  # no API discovery for a profile without manifests
        dynamic = fresh_dynamic(self._api())
        for entry in self.loaded.profile.manifests:
            path = Path(self.resolve(entry))
            try:
                docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
            except (OSError, yaml.YAMLError) as exc:
                raise ProfileError(f"profile {self.loaded.path}: manifest {path}: {exc}") from None
            for doc in docs:
                try:
                    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
                except ResourceNotFoundError:
                    raise ProfileError(
                        f"profile {self.loaded.path}: manifest {path}: the cluster serves no {doc['kind']} in "
                        f"{doc['apiVersion']} (a CustomResourceDefinition for it must come before it, in order)"
                    ) from None
                ns = doc["metadata"].get("namespace") if resource.namespaced else None
                if self._create(resource, doc, ns):
                    self.applied.append((resource, doc["metadata"]["name"], ns))
                if doc["kind"] == "CustomResourceDefinition":
                    self._wait_established(resource, doc["metadata"]["name"])
                    dynamic = fresh_dynamic(self._api())  # the objects that follow may be of its kind
        if self.applied:
            self.progress(f"applied {len(self.applied)} objects from {len(self.loaded.profile.manifests)} manifests")

    def _wait_established(self, resource: Any, name: str) -> None:
        """A CRD's custom objects can be created once it is Established (its API is served)."""

        def established(crd: Any) -> bool:
            conditions = (crd.status or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_for(
            lambda: resource.get(name=name),
            established,
            timeout=60.0,
            expected=f"CustomResourceDefinition {name} to be Established",
            describe=lambda crd: f"conditions: {(crd.status or {}).get('conditions') if crd else None}",
        )

    def _create(self, resource: Any, doc: dict[str, Any], ns: str | None) -> bool:
        """Create one manifest object; True if the harness made it (and so deletes it at the end).

        An object still being deleted (a namespace of the previous run finalizing) is waited out; one that
        exists and is not being deleted belongs to someone else and is left alone.
        """
        name = doc["metadata"]["name"]

        def attempt() -> str:
            try:
                resource.create(body=doc, namespace=ns)
                return "created"
            except ApiException as exc:
                if exc.status != 409:
                    raise ImplementationFailed(
                        f"cannot create {doc['kind']} {name}: {exc.status} {exc.reason}"
                    ) from None
            current = resource.get(name=name, namespace=ns)
            return "deleting" if current.metadata.deletionTimestamp else "exists"

        outcome = wait_for(
            attempt,
            lambda o: o != "deleting",
            timeout=60.0,
            expected=f"{doc['kind']} {name} of an earlier run to finish deleting",
        )
        return outcome == "created"

    def _delete_manifests(self) -> list[str]:
        problems = []
        while self.applied:
            resource, name, ns = self.applied.pop()
            try:
                resource.delete(name=name, namespace=ns)
            except ApiException as exc:
                if exc.status != 404:
                    problems.append(f"cannot delete {resource.kind} {name}: {exc.status} {exc.reason}")
        return problems

    def log_marks(self) -> dict[str, int]:
        """Where each running process's log ends now (bytes), to quote what it writes from here on (log_since)."""
        return {r.spec.name: r.log.stat().st_size if r.log.exists() else 0 for r in self.running}

    def log_since(self, marks: dict[str, int], lines: int = 10) -> dict[str, list[str]]:
        """Per process, the last `lines` lines its log got since `marks` (a restarted process's new log from its
        start), and before them the last `lines` lines of its whole log that say error, warning, exception, failed or
        abort (a stack often says what went wrong once, before the scenario that suffers from it began)."""
        out: dict[str, list[str]] = {}
        for r in self.running:
            if not r.log.exists():
                continue
            data = r.log.read_bytes()
            mark = marks.get(r.spec.name, 0)
            first_new = data[: mark if mark <= len(data) else 0].count(b"\n")
            text = data.decode(errors="replace").splitlines()
            loud = [i for i, line in enumerate(text) if _LOUD.search(line)][-lines:]
            tail = range(max(first_new, len(text) - lines), len(text))
            picked = sorted({*loud, *tail})  # in the order written
            if picked:
                out[r.spec.name] = [text[i] for i in picked]
        return out

    def _port_file(self, name: str) -> Path:
        return self.workdir / f"{name}.port"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        prof = self.loaded.profile
        atexit.register(self._kill_all)
        try:
            self._apply_manifests()
            for hook in prof.hooks.setup:
                self._run_once(hook.name, hook.command, hook.env, hook.timeout_s, "setup")
            since = self._list_nodes() if self.follows_nodes else None
            for node in sorted(self._nodes):
                self._node_hooks(node)
            for spec in prof.processes:
                for node in sorted(self._nodes) if spec.per_node else [None]:
                    self._start(spec, node)
            for endpoint in (prof.fabric_probe, prof.fault_injector, prof.readiness_probe):
                if endpoint is not None:
                    url = self.resolve(endpoint.url)
                    if not url.startswith(("http://", "https://")):
                        raise ProfileError(f"profile {self.loaded.path}: {endpoint.url} is {url!r}, not an http(s) URL")
                    self._registered.append(url)
                    endpoints.register(url, self._endpoint_ca(endpoint.url, endpoint.ca_file), self._token(endpoint))
            if since is not None:
                self._follow_nodes(since)
        except BaseException:
            self.stop()
            raise

    def _token(self, endpoint: Any) -> str | None:
        return self.resolve(endpoint.token) if endpoint.token else None

    def _endpoint_ca(self, url: str, ca_file: str | None) -> str | None:
        """The endpoint's own CA; else the run's CA for {https_url:NAME} of a process the harness made a certificate
        for (tls: true); else None (the system's CAs)."""
        if ca_file:
            return self.resolve(ca_file)
        tls = {p.name for p in self.loaded.profile.processes if p.tls}
        if any(m[1] == "https_url" and m[2] in tls for m in PLACEHOLDER.finditer(url)):
            return str(self.ca.ensure_ca())
        return None

    @property
    def follows_nodes(self) -> bool:
        """Node hooks or perNode processes: the harness follows the cluster's nodes."""
        prof = self.loaded.profile
        return bool(prof.hooks.node) or any(p.per_node for p in prof.processes)

    def _list_nodes(self) -> str:
        if self.nodes is None:
            self.nodes = KubeNodes(client.CoreV1Api(self._api()))
        names, since = self.nodes.list()
        self._nodes = set(names)
        self.progress(f"following {len(names)} nodes for node hooks and perNode processes")
        return since

    def _follow_nodes(self, since: str) -> None:
        assert self.nodes is not None
        self._follower = NodeFollower(
            self.nodes, set(self._nodes), since, self._node_joined, self._node_gone, self._follow_problem
        ).start()

    def _follow_problem(self, message: str) -> None:
        self.progress(message)

    def _node_hooks(self, node: str) -> None:
        for hook in self.loaded.profile.hooks.node:
            self._run_once(f"{hook.name}@{node}", hook.command, hook.env, hook.timeout_s, "node", node)

    def _node_joined(self, node: str) -> None:
        """A node joined during the run: its node hooks, then its perNode processes (a failure is reported at the
        end of the run: the follower's thread cannot stop the run)."""
        with self._restarting:
            self._nodes.add(node)
            self.progress(f"node {node} joined")
            try:
                self._node_hooks(node)
                for spec in self.loaded.profile.processes:
                    if spec.per_node:
                        self._start(spec, node)
            except (ImplementationFailed, ProfileError, ApiException) as exc:
                if self._still_there(node):
                    self._node_problems.append(f"node {node} joined, its per-node setup failed: {exc}")
                    self.progress(self._node_problems[-1])
                    return
                # The node left while its setup ran (IMP-16 deletes the node it added): a plugin that cannot start
                # for a node that is gone is no fault. Its instances go now; the follower reports the departure next.
                self.progress(f"node {node} left during its per-node setup ({str(exc).splitlines()[0]})")
                gone = [run for run in self.running if run.node == node]
                self.running = [run for run in self.running if run.node != node]
                for run in gone:
                    _signal_group(run.proc, signal.SIGKILL)
                    run.proc.wait()

    def _still_there(self, node: str) -> bool:
        """Whether `node` is still a node of the cluster (asked now; on doubt, yes: the failure is then reported)."""
        assert self.nodes is not None
        try:
            return node in self.nodes.list()[0]
        except (ApiException, OSError):
            return True

    def _node_gone(self, node: str) -> None:
        """A node left: its perNode processes stop (as a DaemonSet's pods go with their node), its holder pods go."""
        with self._restarting:
            self._nodes.discard(node)
            mine = [run for run in self.running if run.node == node]
            self.running = [run for run in self.running if run.node != node]
            self.progress(f"node {node} left: stopping {[run.name for run in mine]}")
            self._node_problems += self._terminate(mine, STOP_TIMEOUT_S)
            self._node_problems += self._remove_holders(node)

    def _run_once(
        self, name: str, command: list[str], env: dict[str, str], timeout: float, phase: str, node: str | None = None
    ) -> None:
        """A hook or a restart command: run to completion, its output in the run's logs; fails on non-zero exit."""
        argv = [self.resolve(arg, node=node) for arg in command]
        full_env = dict(
            os.environ, KUBECONFIG=str(self.kubeconfig), **{k: self.resolve(v, node=node) for k, v in env.items()}
        )
        log = self.workdir / f"{phase}-{name}.log"
        self.progress(f"{phase} {name}: {' '.join(argv)}")
        with log.open("ab") as out:
            try:
                done = subprocess.run(argv, env=full_env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
            except OSError as exc:
                raise ImplementationFailed(f"{phase} {name}: cannot run {argv[0]}: {exc.strerror}") from None
            except subprocess.TimeoutExpired:
                raise ImplementationFailed(f"{phase} {name}: still running after {timeout:g}s (see {log})") from None
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise ImplementationFailed(f"{phase} {name} exited with {done.returncode}; last lines of {log}:\n{tail}")

    def restart_role(
        self, role: Role, window: list[float] | None = None, while_down: Callable[[], None] | None = None
    ) -> str:
        """Restart one role of the stack (IMP-8): its process, or its restart command. Says what was done; `window`
        gets the restart's own start and end (time.time()). `while_down` runs between the kill and the start (a
        process role only: a restart command is one step)."""
        if while_down is not None and role.process is None:
            raise ValueError(f"role {role.name} restarts by a command: nothing can run while it is down")
        with self._restarting:
            began = time.time()
            try:
                if role.process is not None:
                    pid = self.restart(role.process, while_down)
                    return f"killed {role.process} and started it again (pid {pid})"
                assert role.command is not None
                self._run_once(role.name, role.command, {}, role.timeout_s, "restart")
                self.restarts += 1
                return f"ran the restart command of {role.name}"
            finally:
                if window is not None:
                    window[:] = [began, time.time()]

    def _start(self, spec: Process, node: str | None = None) -> _Running:
        name = instance_name(spec.name, node)
        command = [self.resolve(arg, spec, node) for arg in spec.command]
        kubeconfig = self.resolve(spec.kubeconfig, spec, node)
        env = dict(os.environ, PYTHONUNBUFFERED="1", KUBECONFIG=kubeconfig)
        if spec.home:  # for a process that reads only $HOME/.kube/config
            home = self.workdir / f"home-{name}"
            (home / ".kube").mkdir(parents=True, exist_ok=True)
            (home / ".kube" / "config").write_bytes(Path(kubeconfig).read_bytes())
            env["HOME"] = str(home)
        env.update({key: self.resolve(value, spec, node) for key, value in spec.env.items()})
        log = self.workdir / f"{name}.log"
        self._port_file(name).unlink(missing_ok=True)
        with log.open("wb") as out:
            try:
                proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                raise ImplementationFailed(f"{name}: cannot run {command[0]}: {exc.strerror}") from None
        run = _Running(spec, proc, log, node=node)
        self.running = [*self.running, run]  # copy-on-write: other threads iterate it
        if spec.fixed_port and not spec.port_file:
            run.port = self._port(name)
        if spec.port_file:
            run.port = int(
                self._wait(
                    run,
                    lambda: self._port_file(name).read_text().strip(),
                    str.isdigit,
                    "its port file",
                    spec.ready.timeout_s if spec.ready else 30.0,
                )
            )
        if spec.ready and spec.ready.http:
            ca = str(self.ca.ensure_ca()) if spec.tls else spec.ready.ca_file and self.resolve(spec.ready.ca_file)
            url = f"{'https' if ca else 'http'}://127.0.0.1:{run.port}{spec.ready.http}"
            context = ssl.create_default_context(cafile=ca) if ca else None
            self._wait(
                run,
                lambda: urllib.request.urlopen(url, timeout=5, context=context).status,
                lambda s: 200 <= s < 300,
                f"GET {url} to answer 2xx",
                spec.ready.timeout_s,
            )
        elif spec.ready and spec.ready.log:
            pattern = re.compile(spec.ready.log)
            self._wait(
                run,
                lambda: run.log.read_text(errors="replace"),
                lambda t: bool(pattern.search(t)),
                f"a line matching {spec.ready.log!r} in {log}",
                spec.ready.timeout_s,
            )
        self.progress(f"started {name} (pid {proc.pid}{f', port {run.port}' if run.port else ''})")
        return run

    def _wait(
        self, run: _Running, observe: Callable[[], T], done: Callable[[T], bool], expected: str, timeout: float
    ) -> T:
        def checked() -> T:  # a process that died fails at once, with its output
            if run.proc.poll() is not None:
                raise ImplementationFailed(
                    f"{run.name} exited with {run.proc.returncode} during start-up; "
                    f"last lines of {run.log}:\n{run.tail()}"
                )
            return observe()

        return wait_for(
            checked,
            done,
            timeout=timeout,
            expected=f"{run.name}: {expected}",
            describe=lambda _seen: f"last lines of {run.log}:\n{run.tail()}",
            # local and cheap to check (a file, a loopback GET): the default back-off to 2 s would add up to 2 s
            # to each process's start, one after another
            interval=0.1,
            max_interval=0.25,
        )

    def restart(self, name: str, while_down: Callable[[], None] | None = None) -> int:
        """Kill process `name` without warning (SIGKILL: no clean shutdown) and start it again; wait until it is
        ready. Returns the new pid. The killed run's log is kept next to the new one. `while_down` runs once the
        killed process is gone, before the new one starts."""
        with self._restarting:
            return self._restart(name, while_down)

    def _restart(self, name: str, while_down: Callable[[], None] | None) -> int:
        """`name`: a process, an instance NAME@NODE, or a perNode process (all its instances, killed together)."""
        runs = [r for r in self.running if r.name == name or (r.spec.per_node and r.spec.name == name)]
        if not runs:
            raise ImplementationFailed(f"no running process {name!r} (running: {[r.name for r in self.running]})")
        # Copy-on-write: scenario threads resolve {url:...} while this runs; never mutate the list they iterate.
        places = [self.running.index(run) for run in runs]
        self.running = [r for r in self.running if r not in runs]
        for run in runs:
            if run.proc.poll() is None:
                os.killpg(run.proc.pid, signal.SIGKILL)
        for run in runs:
            run.proc.wait()
        self.restarts += 1
        for run in runs:
            run.log.replace(run.log.with_suffix(f".killed-{self.restarts}.log"))
        pids = ", ".join(str(r.proc.pid) for r in runs)
        self.progress(f"killed {name} (pid {pids}); starting it again")
        started: list[_Running] = []
        try:
            if while_down is not None:
                while_down()
        finally:  # started again whatever while_down did: the shared stack must not stay down
            for run in runs:
                if run.node is None or run.node in self._nodes:  # not for a node that left meanwhile
                    started.append(self._start(run.spec, run.node))
        rest = [r for r in self.running if r not in started]
        for place, run in sorted(zip(places, started, strict=False), key=lambda pair: pair[0]):
            rest.insert(place, run)
        self.running = rest
        return started[0].proc.pid if started else 0

    def stop(self) -> list[str]:
        """Stop every process at once (SIGTERM to each process group, SIGKILL to what is left after a grace: the
        full one normally, a short one when the run was interrupted); return what went wrong.

        Shielded from interrupts, and whatever happens meanwhile, no process of the implementation outlives it.
        """
        with shielded():
            try:
                return self._stop()
            finally:
                self._kill_all()

    def _terminate(self, runs: list[_Running], grace: float) -> list[str]:
        """SIGTERM to each, SIGKILL to what is left after `grace`; what went wrong."""
        problems = []
        exited = {id(run) for run in runs if run.proc.poll() is not None}
        for run in runs:
            if id(run) not in exited:
                _signal_group(run.proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for run in runs:
            if id(run) in exited:
                problems.append(f"{run.name} had exited before the end ({run.proc.returncode}):\n{run.tail()}")
                continue
            try:
                run.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(run.proc, signal.SIGKILL)
                run.proc.wait()
                problems.append(f"{run.name} ignored SIGTERM for {grace:g}s and was killed")
                continue
            code = run.proc.returncode
            if code not in (0, -signal.SIGTERM):
                problems.append(f"{run.name} exited with {code} on SIGTERM; last lines:\n{run.tail()}")
            self.progress(f"stopped {run.name}")
        return problems

    def _stop(self) -> list[str]:
        if self._follower is not None:  # first: no node event starts or stops anything during the stop
            self._follower.stop()
            self._follower = None
        with self._restarting:
            grace = INTERRUPTED_STOP_TIMEOUT_S if CANCELLED.is_set() else STOP_TIMEOUT_S
            # newest first, as they were started in order
            problems = self._node_problems + self._terminate(list(reversed(self.running)), grace)
            self._node_problems = []
            for hook in self.loaded.profile.hooks.teardown:
                try:
                    self._run_once(hook.name, hook.command, hook.env, hook.timeout_s, "teardown")
                except (ImplementationFailed, ProfileError) as exc:
                    problems.append(str(exc))
            for node in list(self._holders):
                problems += self._remove_holders(node)
            problems += self._delete_manifests()
            while self._registered:
                endpoints.unregister(self._registered.pop())
            if self._client is not None:
                self._client.close()
                self._client = None
            return problems

    def _kill_all(self) -> None:
        """SIGKILL every process group still alive (also at interpreter exit: nothing outlives the run). Every
        group is signalled before any is waited for, so an interrupt while waiting cannot spare one."""
        alive = [run for run in self.running if run.proc.poll() is None]
        self.running = []
        for run in alive:
            _signal_group(run.proc, signal.SIGKILL)
        for run in alive:
            run.proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the process and its children (each process runs in a session of its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
