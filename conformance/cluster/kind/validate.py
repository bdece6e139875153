"""Validate a kind configuration with kind's own loader and validator, on a machine without a Docker engine.

`kind create cluster` decodes the config strictly (unknown fields are errors), asks the node provider for its
info, looks for an existing cluster of that name, runs kind's validation, and only then touches Docker to pull
the node image. A stand-in `docker` first on PATH answers the first two questions like an empty engine and
stops kind at anything else: a config that gets as far as the node-image step passed kind's checks; any earlier
error is kind's verdict on the config.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

STOP = "dra-conformance-docker-stand-in: stopping kind before it creates anything"
_SHIM = f"""#!/bin/sh
# Stand-in for docker (conformance.cluster.kind.validate): an engine with no containers that refuses to do anything.
echo "$*" >> "$DOCKER_STAND_IN_LOG"
case "$1" in
  -v) echo "Docker version 28.0.0, build stand-in" ;;
  info) echo '{{"CgroupVersion":"2","MemoryLimit":true,"PidsLimit":true,"CPUShares":true,"SecurityOptions":[]}}' ;;
  ps) ;;
  # Anything else: the config has passed; end kind at once (it would retry the image pull with back-off).
  *) echo "{STOP}: docker $*" >&2; kill -TERM "$PPID"; exit 97 ;;
esac
"""
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Verdict:
    ok: bool
    detail: str
    docker_calls: list[str]


def stand_in_docker(folder: Path) -> Path:
    """Write the stand-in `docker` into `folder`; return the file it logs its calls to ($DOCKER_STAND_IN_LOG)."""
    shim = folder / "docker"
    shim.write_text(_SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    log = folder / "calls.log"
    log.touch()
    return log


def check_kind_config(kind: Path, config: Path, cwd: Path | None = None) -> Verdict:
    """Run `kind create cluster --config` against the stand-in docker; ok if kind reached the node-image step."""
    name = (yaml.safe_load(config.read_text()) or {}).get("name") or "kind"
    with tempfile.TemporaryDirectory(prefix="kind-validate-") as tmp:
        log = stand_in_docker(Path(tmp))
        env = dict(
            os.environ,
            PATH=f"{tmp}{os.pathsep}{os.environ.get('PATH', '')}",
            DOCKER_STAND_IN_LOG=str(log),
            KIND_EXPERIMENTAL_PROVIDER="docker",
            KUBECONFIG=str(Path(tmp) / "kubeconfig"),  # kind never writes it here, but never the user's either
        )
        cmd = [str(kind), "create", "cluster", "--name", name, "--config", str(config.resolve()), "--retain"]
        proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
        calls = log.read_text().splitlines()
    output = (proc.stdout + proc.stderr).strip()
    refused = [c for c in calls if c.split()[:1] not in (["-v"], ["info"], ["ps"])]
    # The first thing kind does after validation is make sure the node image is there.
    reached_images = bool(refused) and refused[0].split()[:2] in (["inspect", "--type=image"], ["pull"])
    if proc.returncode != 0 and reached_images:
        return Verdict(True, f"kind accepted the config and went on to `docker {refused[0]}`", calls)
    return Verdict(False, output[-3000:] or f"kind exited {proc.returncode} without output", calls)
