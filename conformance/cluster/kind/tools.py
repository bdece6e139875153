"""What the kind provider needs from the machine: a reachable Docker engine, and images to load into the nodes."""

from __future__ import annotations

import shutil
import subprocess

DOCKER_TIMEOUT_S = 30.0


def docker_problem() -> str | None:
    """Why kind cannot run here (no docker client, no engine behind it), or None when it can."""
    docker = shutil.which("docker")
    if docker is None:
        return "the docker command is not installed"
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"`docker info` did not answer within {DOCKER_TIMEOUT_S:g}s"
    if proc.returncode != 0 or not proc.stdout.strip():
        reason = (proc.stderr.strip().splitlines() or ["no server version"])[-1]
        return f"no Docker engine answers `docker info` ({reason})"
    return None


def missing_images(images: list[str]) -> list[str]:
    """The images of `images` that the local Docker engine does not have (so `kind load` would fail)."""
    missing = []
    for image in images:
        proc = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=DOCKER_TIMEOUT_S)
        if proc.returncode != 0:
            missing.append(image)
    return missing
