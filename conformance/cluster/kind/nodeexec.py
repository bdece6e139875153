"""Look inside a kind node (a Docker container named after the Node): the container runtime's view (crictl) and the
CDI specs the kubelet plugins wrote there. The real kubelet path's evidence, which the API does not carry."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml

EXEC_TIMEOUT_S = 30.0
CDI_DIRS = ("/var/run/cdi", "/etc/cdi")


class NodeExecError(RuntimeError):
    """A command in the node container failed."""


def node_exec(node: str, *cmd: str) -> str:
    proc = subprocess.run(["docker", "exec", node, *cmd], capture_output=True, text=True, timeout=EXEC_TIMEOUT_S)
    if proc.returncode != 0:
        raise NodeExecError(f"`docker exec {node} {' '.join(cmd)}` failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


@dataclass(frozen=True)
class CdiSpec:
    path: str
    mtime: float  # seconds since the epoch (the node shares the host's clock)
    kind: str  # vendor/class
    spec: dict[str, Any]

    def edits(self, device: str) -> dict[str, Any] | None:
        """The container edits of `device` (its own and the spec-wide ones), None if the spec has no such device."""
        for d in self.spec.get("devices") or []:
            if d.get("name") == device:
                own = d.get("containerEdits") or {}
                common = self.spec.get("containerEdits") or {}
                return {"env": (common.get("env") or []) + (own.get("env") or [])}
        return None


def cdi_specs(node: str) -> list[CdiSpec]:
    """Every CDI spec file on the node (JSON or YAML) with its modification time."""
    script = (
        f"for f in $(find {' '.join(CDI_DIRS)} -maxdepth 1 -type f \\( -name '*.json' -o -name '*.yaml' \\) "
        '2>/dev/null); do printf \'%s\\t%s\\t\' "$f" "$(stat -c %.Y "$f")"; base64 -w0 "$f"; echo; done'
    )
    specs = []
    for line in node_exec(node, "sh", "-c", script).splitlines():
        path, mtime, body = line.split("\t", 2)
        if not mtime or not body:  # removed between the listing and the read: the next read sees it gone
            continue
        try:
            spec = yaml.safe_load(base64.b64decode(body)) or {}
        except yaml.YAMLError:
            continue  # being rewritten; the next read sees it whole
        specs.append(CdiSpec(path, float(mtime), str(spec.get("kind", "")), spec))
    return specs


def resolve(specs: list[CdiSpec], qualified: str) -> tuple[CdiSpec, dict[str, Any]] | None:
    """The spec and edits of a fully qualified CDI device name (vendor/class=device)."""
    kind, _, device = qualified.partition("=")
    for spec in specs:
        if spec.kind == kind and (edits := spec.edits(device)) is not None:
            return spec, edits
    return None


@dataclass(frozen=True)
class RuntimeContainer:
    cdi_devices: list[str]
    env: list[str]
    raw: dict[str, Any]


def inspect_container(node: str, container_id: str) -> RuntimeContainer:
    """crictl's view of a container: the CDI devices the kubelet asked for and the environment it runs with."""
    info = json.loads(node_exec(node, "crictl", "inspect", container_id.split("://")[-1])).get("info") or {}
    config = info.get("config") or {}
    devices = config.get("CDI_devices") or config.get("cdi_devices") or config.get("CDIDevices") or []
    names = [d.get("name", "") if isinstance(d, dict) else str(d) for d in devices]
    env = ((info.get("runtimeSpec") or {}).get("process") or {}).get("env") or []
    return RuntimeContainer(names, list(env), info)


@dataclass(frozen=True)
class ContainerState:
    state: str  # CONTAINER_RUNNING, CONTAINER_EXITED, ... ("gone": the runtime no longer knows it)
    finished_at: float | None  # seconds since the epoch, once it ended


def container_state(node: str, container_id: str) -> ContainerState:
    """Whether a container still runs on the node, and when it ended (crictl's status, the runtime's own clock)."""
    try:
        out = node_exec(node, "crictl", "inspect", "-o", "json", container_id.split("://")[-1])
    except NodeExecError as exc:
        if any(word in str(exc).lower() for word in ("not found", "notfound")):
            return ContainerState("gone", None)
        raise
    status = json.loads(out).get("status") or {}
    return ContainerState(str(status.get("state", "")), _rfc3339(status.get("finishedAt")))


def _rfc3339(text: Any) -> float | None:
    """An RFC 3339 time with up to nanoseconds (CRI's), None for the zero time or nothing."""
    found = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if found is None or found["date"].startswith(("0001-", "1970-")):
        return None
    zone = "+00:00" if found["zone"] in ("Z", "z") else found["zone"]
    stamp = datetime.fromisoformat(f"{found['date']}T{found['time']}{zone}").timestamp()
    return stamp + float("0." + found["fraction"][:9]) if found["fraction"] else stamp


_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?(?P<zone>[Zz]|[+-]\d{2}:\d{2})"
)
