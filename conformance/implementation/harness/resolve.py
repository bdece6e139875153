"""Filling a profile string's placeholders for this run: ports (a process's own and its named ones), addresses,
certificates, kubeconfigs of accounts (and the holder pods those bound to a pod need, on a node or where the scheduler
places them)."""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

from kubernetes import client

from conformance.implementation.harness.state import State, instance_name
from conformance.implementation.profile import (
    NODE,
    PLACEHOLDER,
    PLAIN_PLACEHOLDERS,
    Process,
    ProfileError,
    Scope,
    placeholder_problem,
)
from conformance.implementation.serviceaccount import (
    SCHEDULED,
    place_holder_pod,
    remove_holder_pod,
    scheduled_node,
    service_account_kubeconfig,
)


class Resolving(State):
    """The placeholders of the profile, filled (placeholder_problem says where each may stand)."""

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
                return str(self._port(port_key(instance_name(process.name, node), arg)))
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
                return str(self._pod_kubeconfig(namespace, sa, on or node, process))
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
        `node`); NAME:PORT: its port named PORT ({port:PORT})."""
        process, _, named = name.partition(":")
        for run in self.running:
            if run.spec.name != process or run.node != (node if run.spec.per_node else None):
                continue
            port = self._ports.get(port_key(run.name, named)) if named else run.port
            if port is not None:
                hostport = f"127.0.0.1:{port}"
                return {"url": f"http://{hostport}", "https_url": f"https://{hostport}", "hostport": hostport}[key]
        has = f"{{port:{named}}}" if named else "a port ({port} or portFile: true)"
        raise ProfileError(
            f"profile {self.loaded.path}: {{{key}:{name}}} needs an earlier process {process!r} with "
            f"{has}{f' on node {node}' if node else ''}"
        )

    def _sa_kubeconfig(self, namespace: str, name: str) -> Path:
        path = self.workdir / f"sa-{namespace}-{name}.kubeconfig"
        if not path.exists():
            service_account_kubeconfig(self.kubeconfig, client.CoreV1Api(self._api()), namespace, name, path)
        return path

    def _pod_kubeconfig(self, namespace: str, sa: str, node: str | None, process: Process | None = None) -> Path:
        """A kubeconfig whose token is bound to a pod of `sa` the harness places on `node` (made once per node) or,
        with node None, where the scheduler places it (made once per run; `placed` says where it landed)."""
        path = self.workdir / f"pod-{namespace}-{sa}@{node or SCHEDULED}.kubeconfig"
        if not path.exists():
            core = client.CoreV1Api(self._api())
            ref = place_holder_pod(core, namespace, sa, node)
            landed = node or scheduled_node(core, namespace, ref["name"])
            self._holders.setdefault(landed, []).append((namespace, ref["name"]))
            service_account_kubeconfig(self.kubeconfig, core, namespace, sa, path, bound_to=ref)
            if node is None:
                used_by = f" for process {process.name}" if process else ""
                self.placed[f"{namespace}/{sa}"] = landed
                self.progress(
                    f"pod {namespace}/{ref['name']}{used_by} was placed by the scheduler on node {landed}: the token "
                    f"of {path.name} is bound to it (that node's, for the API server)"
                )
            else:
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
        for account in [a for a, on in self.placed.items() if on == node]:  # its pod is gone with the node
            ns, sa = account.split("/")
            (self.workdir / f"pod-{ns}-{sa}@{SCHEDULED}.kubeconfig").unlink(missing_ok=True)
        return problems


def port_key(instance: str, named: str | None) -> str:
    """Where the harness keeps an instance's port: its own ({port}), or NAME@NODE:PORT for {port:PORT}."""
    return f"{instance}:{named}" if named else instance
