"""The placeholders of a profile string ({port}, {url:NAME}, {node}, ...): their forms, what each stands for, and
where each may stand (placeholder_problem: one definition for the harness that fills them and `profile check`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol


class Process(Protocol):
    """What placeholder_problem reads of a profile process (stack.Process), without importing stack, which imports
    this module."""

    port_file: bool


# {key} or {key:arg} in commands, env, manifests and endpoint URLs (see Process for the keys)
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([A-Za-z0-9_./@:-]+))?\}")
# The placeholders without an argument whose value is the same for the whole run.
PLAIN_PLACEHOLDERS = frozenset({"kubeconfig", "workdir", "bin", "profile_dir", "ca_file"})
# {KEY:NAME} of a process with a port: the forms of its address
ADDRESS_PLACEHOLDERS = frozenset({"url", "https_url", "hostport"})
NODE = "{node}"  # in a per-node process or a node hook: the node it runs for (filled before the others)
# Every placeholder, in the form a profile writes it, and what it stands for: the profile reference (docs/) is
# generated from this, and placeholder_problem refuses a key that is not here, so a new one cannot go undocumented.
PLACEHOLDERS: dict[str, str] = {
    "{kubeconfig}": "the run's admin kubeconfig (a file)",
    "{workdir}": "the run's working folder for the implementation",
    "{bin}": "the folder of the running Python's console scripts (the reference's commands are there)",
    "{profile_dir}": "the folder of the profile file",
    "{port}": "a free port the harness picks once per run for this process: the same after a restart, so the "
    "{url:NAME} others hold stays right (a process's command or env only; per instance for a perNode process)",
    "{port:NAME}": "another free port of this process, named NAME, picked once per run like {port} (a process with "
    "several ports, e.g. health and metrics: one placeholder each; others reach it with {url:PROCESS:NAME})",
    "{port_file}": "this process's port file: with portFile: true it writes the port it bound there (a restart may "
    "change it)",
    "{url:NAME}": "http://127.0.0.1:PORT of an earlier process NAME with {port} or portFile",
    "{https_url:NAME}": "https://127.0.0.1:PORT of the same (an endpoint there trusts the run CA when NAME has tls)",
    "{hostport:NAME}": "127.0.0.1:PORT of the same",
    "{url:NAME:PORT}": "http://127.0.0.1:N of the port named PORT ({port:PORT}) of an earlier process NAME; "
    "{https_url:NAME:PORT} and {hostport:NAME:PORT} likewise",
    "{tls_cert:NAME}": "the serving certificate (127.0.0.1, localhost) the harness made for process NAME (tls: true)",
    "{tls_key:NAME}": "its key (0600)",
    "{ca_file}": "the CA of the run that signed those certificates",
    "{sa_kubeconfig:NAMESPACE/NAME}": "a kubeconfig with a bound token of that ServiceAccount (e.g. one the "
    "profile's manifests create): the process runs with its own RBAC, never as cluster admin",
    "{pod_kubeconfig:NAMESPACE/NAME@NODE}": "the same, the token bound to a pod the harness places on NODE: the API "
    "server reports the node (authentication.kubernetes.io/node-name) to admission policies; per node, @NODE may be "
    "left out",
    "{pod_kubeconfig:NAMESPACE/NAME}": "outside a perNode process: the token bound to a pod the scheduler places "
    "(a Deployment's pod: no node chosen by you), once per run; the run's progress and IMP-9 say where it landed",
    "{node}": "in a perNode process or a node hook: the node's name (filled first: {pod_kubeconfig:ns/sa@{node}})",
    "{env:NAME}": "a variable of the suite's environment; unset is an error",
}
_PLACEHOLDER_KEYS = frozenset(PLACEHOLDER.fullmatch(form)[1] for form in PLACEHOLDERS)  # type: ignore[index]


def uses_placeholder(texts: list[str], key: str) -> bool:
    return any(m[1] == key and m[2] is None for text in texts for m in PLACEHOLDER.finditer(text))


def placeholder_args(texts: list[str], key: str) -> list[str]:
    """The arguments of {key:ARG} in the texts, each once, in the order written (e.g. a process's named ports)."""
    found = (m[2] for text in texts for m in PLACEHOLDER.finditer(text) if m[1] == key and m[2] is not None)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Scope:
    """Where a profile string stands, for placeholder_problem. `process`: the process whose command or env holds it
    (None: a manifest, hook, endpoint or restart command); `ported`: the processes with a port that start before this
    string is used (None: not known here; the harness checks that when it fills the address); `tls`: the processes
    with tls: true (None: not known); `per_node`: a per-node process or a node hook ({node} is known);
    `per_node_processes`: the processes with perNode: true (their address exists only per node); `named_ports`:
    PROCESS:PORT of every {port:PORT} of the processes that start before this string is used (None: not known)."""

    process: Process | None = None
    ported: frozenset[str] | None = None
    tls: frozenset[str] | None = None
    per_node: bool = False
    per_node_processes: frozenset[str] = frozenset()
    named_ports: frozenset[str] | None = None


def placeholder_problem(key: str, arg: str | None, scope: Scope) -> str | None:
    """Why {key} / {key:arg} cannot be used where it stands, or None: the one definition of the placeholders, used
    by the harness (filling them) and by `profile check` (before a run)."""
    if key not in _PLACEHOLDER_KEYS:
        return (
            "unknown placeholder (each one is described in PLACEHOLDERS, "
            "conformance/implementation/profile/placeholders.py)"
        )
    process = scope.process
    if key in PLAIN_PLACEHOLDERS:
        return None if arg is None else f"{{{key}}} takes no argument"
    if key == "node":
        if arg is not None:
            return "{node} takes no argument"
        return None if scope.per_node else "{node} only in a perNode process or a node hook"
    if key in ("port_file", "port"):
        if arg is not None and (key == "port_file" or not PORT_NAME.fullmatch(arg)):
            return f"{{{key}}} takes no argument" if key == "port_file" else f"{{port:{arg}}}: {PORT_NAME_RULE}"
        if process is None:
            return f"{{{key}}} only in a process's command or env (it is that process's own)"
        if key == "port_file" and not process.port_file:
            return "{port_file} only in a process with portFile: true"
        return None
    if key in ADDRESS_PLACEHOLDERS and arg:
        return _address_problem(key, arg, scope)
    if key in ("tls_cert", "tls_key") and arg:
        if scope.tls is not None and arg not in scope.tls:
            return f"{{{key}:{arg}}} needs a process {arg!r} with tls: true"
        return None
    if key == "sa_kubeconfig" and arg:
        return None if _SA.fullmatch(arg) else "{sa_kubeconfig:NAMESPACE/SERVICEACCOUNT}"
    if key == "pod_kubeconfig" and arg:
        if _POD_BOUND.fullmatch(arg):
            return None
        if _SA.fullmatch(arg):
            return None  # per node: that node; elsewhere a pod the scheduler places
        return "{pod_kubeconfig:NAMESPACE/SERVICEACCOUNT@NODE} (without @NODE: per node its node, else the scheduler's)"
    if key == "env" and arg:
        return None  # whether it is set is known only where it is filled
    return "unknown placeholder"


def _address_problem(key: str, arg: str, scope: Scope) -> str | None:
    """{url:PROCESS}, {url:PROCESS:PORT} (a named port) and the other address forms."""
    name, _, port = arg.partition(":")
    if port:
        if not PORT_NAME.fullmatch(port):
            return f"{{{key}:{arg}}}: {PORT_NAME_RULE}"
        if scope.named_ports is not None and arg not in scope.named_ports:
            return f"{{{key}:{arg}}} needs an earlier process {name!r} with {{port:{port}}} in its command or env"
    elif scope.ported is not None and name not in scope.ported:
        return f"{{{key}:{arg}}} needs an earlier process {name!r} with a port ({{port}} or portFile: true)"
    if name in scope.per_node_processes and not scope.per_node:
        return f"{{{key}:{arg}}}: {name!r} runs per node; only a perNode process or node hook reaches it"
    return None


PORT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # {port:NAME}, as a container port's name
PORT_NAME_RULE = "a port's name is lowercase alphanumerics and '-'"
_SA = re.compile(r"[^/@]+/[^/@]+")  # NAMESPACE/NAME (the API server judges the names themselves)
_POD_BOUND = re.compile(r"[^/@]+/[^/@]+@[^/@]+")
