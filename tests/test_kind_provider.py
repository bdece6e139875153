"""The kind provider's refusals on machines where kind cannot run (like this project's CI: no Docker engine).

No mocks of the Kubernetes API: these paths end before any cluster exists. Where a Docker engine must be absent or
present with certain images, a stand-in `docker` script on PATH plays the docker client (said per test).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cluster.kind.config import CLUSTER_NAME
from conformance.cluster.kind.engine import START_ENV
from conformance.cluster.providers import ClusterSpec, ProviderNotReady, make_provider
from conformance.cluster.providers.kind import REFERENCE_IMAGE, KindProvider

ROOT = Path(__file__).resolve().parents[1]
NO_ENGINE = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"


def _stand_in(folder: Path, script: str) -> str:
    docker = folder / "docker"
    docker.write_text("#!/bin/sh\n" + script)
    docker.chmod(0o755)
    return str(folder)


@pytest.fixture(autouse=True)
def no_dockerd_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """These refusals are of a machine where the suite may not start an engine itself (engine.START_ENV)."""
    monkeypatch.setenv(START_ENV, "never")


@pytest.fixture
def path_without_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH with only the folders that have no docker command (python and the venv stay reachable)."""
    keep = [p for p in os.environ["PATH"].split(os.pathsep) if p and not (Path(p) / "docker").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))
    return tmp_path


def test_no_docker_command_is_named(path_without_docker: Path) -> None:
    with pytest.raises(ProviderNotReady, match=r"docker command is not installed.*--provider local"):
        KindProvider(progress=lambda _m: None).start(ClusterSpec())


def test_a_docker_client_without_engine_is_named(path_without_docker: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand-in docker: the client's own words when no engine listens.
    folder = _stand_in(path_without_docker, f'echo "{NO_ENGINE}" >&2; exit 1\n')
    monkeypatch.setenv("PATH", folder + os.pathsep + os.environ["PATH"])
    with pytest.raises(ProviderNotReady, match=r"no Docker engine answers `docker info`.*Is the docker daemon running"):
        KindProvider(progress=lambda _m: None).start(ClusterSpec())


def test_missing_reference_image_says_how_to_build_it(
    path_without_docker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stand-in docker: an engine that answers `info` and has no images.
    script = 'case "$1" in info) echo 28.0.0 ;; *) echo "Error: No such image: $3" >&2; exit 1 ;; esac\n'
    monkeypatch.setenv("PATH", _stand_in(path_without_docker, script) + os.pathsep + os.environ["PATH"])
    with pytest.raises(ProviderNotReady, match=rf"\['{REFERENCE_IMAGE}'\].*make kind-image"):
        KindProvider(progress=lambda _m: None).start(ClusterSpec())


def test_pytest_kind_options_reach_the_provider() -> None:
    values = {"--cluster-name": "pytest-kind", "--kind-image": "img:1", "--kind-bin": "/k", "--kubeconfig": None}
    provider = make_provider("kind", option=values.get)
    assert isinstance(provider, KindProvider)
    assert (provider.cluster_name, provider.image, provider.kind_bin) == (CLUSTER_NAME, "img:1", "/k")
    named = KindProvider.from_options({"--cluster-name": "mine"}.get)
    assert named.cluster_name == "mine"


def test_suite_on_kind_without_docker_stops_with_the_reason(path_without_docker: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/suite", "--provider", "kind", "-p", "no:cacheprovider", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-2000:]
    assert "cannot start the kind cluster: --provider kind needs a Docker engine" in out
