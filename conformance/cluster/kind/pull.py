"""Whether kind's own node image of a release can be had here: already in the engine, or pulled from a registry that
answers, within a bound stated in what it says.

A machine with no registry access (or a network that drops packets) must not wait minutes on `docker pull`: the
registry's API is first asked (through the proxy the environment names, as the engine would use it), each step
bounded to seconds, and the pull is tried only when it answers; the pull itself is bounded too.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from conformance.cluster.kind.config import NODE_IMAGES
from conformance.cluster.versions import KubeVersion

Progress = Callable[[str], None]
CONNECT_TIMEOUT_S = 5.0  # a registry whose API does not answer a step (connect, TLS, reply) in this: unreachable
PULL_TIMEOUT_S = 300.0  # a reachable registry's pull of a node image (~1 GB unpacked)
DOCKER_HUB = "registry-1.docker.io"


def registry_of(image: str) -> str:
    """The registry (host[:port]) an image reference pulls from (Docker Hub for a short name such as kindest/node)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return DOCKER_HUB


def reachable(registry: str) -> tuple[bool, str]:
    """Whether the registry's API answers (any HTTP status: Docker Hub says 401 without a token) within
    CONNECT_TIMEOUT_S per step (connect, TLS, reply), through the HTTPS_PROXY of the environment if one is set (as
    the engine would use it); and what was asked."""
    url = f"https://{registry}/v2/"
    try:
        urllib.request.build_opener().open(url, timeout=CONNECT_TIMEOUT_S).close()  # a fresh opener reads the proxy
    except urllib.error.HTTPError:
        return True, url
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return False, f"{url} ({reason})"
    return True, url


def registry_node_image_usable(version: KubeVersion, progress: Progress) -> bool:
    """kind's own node image for the release is here or was pulled (a machine with registry access); says what it
    tried and how long it may take."""
    pinned = NODE_IMAGES.get((version.major, version.minor))
    if pinned is None:
        return False
    if subprocess.run(["docker", "image", "inspect", pinned], capture_output=True).returncode == 0:
        return True
    registry = registry_of(pinned)
    ok, what = reachable(registry)
    if not ok:
        progress(f"not pulling {pinned}: no registry reachable ({what}, {CONNECT_TIMEOUT_S:g}s per step)")
        return False
    progress(f"trying to pull {pinned} ({what} answers; giving up after {PULL_TIMEOUT_S:g}s)")
    started = time.monotonic()
    try:
        pulled = subprocess.run(["docker", "pull", pinned], capture_output=True, timeout=PULL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        progress(f"gave up pulling {pinned} after {PULL_TIMEOUT_S:g}s")
        return False
    took = time.monotonic() - started
    if pulled.returncode != 0:
        reason = (pulled.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        progress(f"could not pull {pinned} in {took:.0f}s: {reason[0]}")
        return False
    progress(f"pulled {pinned} in {took:.0f}s")
    return True
