"""kind's own node image: the pull is tried only when a registry answers, within seconds, and is itself bounded
(conformance/cluster/kind/pull.py); and the kind provider's kubectl is the cached one of the cluster's release, not
the first on PATH (providers/kind.py).

Faked: the docker client (a stand-in script on PATH that records its arguments; `pull` sleeps), the registry (a
local socket that listens, or a port nothing listens on, reached as the HTTPS_PROXY the engine would use) and the
binaries cache (ensure_binaries monkeypatched to a stand-in kubectl). No Docker engine, no network.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance.cluster.kind import pull
from conformance.cluster.providers.base import ClusterSpec
from conformance.cluster.providers.kind import KindProvider
from conformance.cluster.versions import parse_version

VERSION = parse_version("1.37.2")


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in docker client first on PATH: no image is present, `pull` sleeps 5 s; every call is logged."""
    calls = tmp_path / "calls"
    script = tmp_path / "bin" / "docker"
    script.parent.mkdir()
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\ncase "$1" in\n  image) exit 1;;\n  pull) sleep 5; exit 0;;\nesac\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    return calls


@pytest.fixture
def silent_proxy() -> Iterator[int]:
    """A proxy that accepts connections and never answers (a network that drops what follows the handshake)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_registry_of_an_image_reference() -> None:
    assert pull.registry_of("kindest/node:v1.37.0@sha256:ab") == pull.DOCKER_HUB
    assert pull.registry_of("node:v1") == pull.DOCKER_HUB
    assert pull.registry_of("ghcr.io/kind/node:v1") == "ghcr.io"
    assert pull.registry_of("localhost:5000/node:v1") == "localhost:5000"


def test_no_pull_when_no_registry_answers(docker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{_closed_port()}")
    said: list[str] = []
    started = time.monotonic()
    assert not pull.registry_node_image_usable(VERSION, said.append)
    assert time.monotonic() - started < pull.CONNECT_TIMEOUT_S
    assert "pull" not in docker.read_text(), "docker pull was run although nothing answered"
    assert len(said) == 1 and "no registry reachable" in said[0] and pull.DOCKER_HUB in said[0], said


def test_a_network_that_drops_packets_is_given_up_within_seconds(
    docker: Path, silent_proxy: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{silent_proxy}")
    monkeypatch.setattr(pull, "CONNECT_TIMEOUT_S", 0.5)
    said: list[str] = []
    started = time.monotonic()
    assert not pull.registry_node_image_usable(VERSION, said.append)
    assert time.monotonic() - started < 2.0
    assert "pull" not in docker.read_text()
    assert "no registry reachable" in said[0] and "0.5s per step" in said[0], said


def test_the_pull_itself_is_bounded_and_says_so(docker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pull, "reachable", lambda registry: (True, f"https://{registry}/v2/"))  # a registry answers
    monkeypatch.setattr(pull, "PULL_TIMEOUT_S", 0.5)
    said: list[str] = []
    started = time.monotonic()
    assert not pull.registry_node_image_usable(VERSION, said.append)
    assert time.monotonic() - started < 3.0, "the stand-in pull sleeps 5 s: it was not cut at the bound"
    assert "pull kindest/node" in docker.read_text()
    assert "answers; giving up after 0.5s" in said[0], said
    assert said[-1] == f"gave up pulling {pull.NODE_IMAGES[(1, 37)]} after 0.5s"


def test_kind_uses_the_cached_kubectl_of_the_release_not_the_first_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "sdk" / "kubectl"  # e.g. a cloud SDK's dispatcher, first on PATH
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho v1.32\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{os.environ['PATH']}")
    cached = tmp_path / "cache" / "v1.37.2" / "kubectl"
    asked: list[str] = []

    def ensure_binaries(version: object, progress: object = None) -> SimpleNamespace:
        asked.append(str(version))
        return SimpleNamespace(kubectl=cached)

    monkeypatch.setattr("conformance.cluster.providers.kind.ensure_binaries", ensure_binaries)
    said: list[str] = []
    spec = ClusterSpec(version=VERSION)
    assert KindProvider(progress=said.append)._kubectl(spec) == cached
    assert asked == [str(VERSION)]
    assert any(str(cached) in line for line in said), said
