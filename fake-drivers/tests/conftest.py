"""Fixtures shared by the component tests that need the fabric manager as a real process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fabric_harness import FAST_SECONDS, TEST_FABRIC, FabricProcess, write_config


@pytest.fixture
def fabric_attach_seconds() -> float:
    """How long one attach/detach takes; a component's conftest overrides it where a window matters."""
    return FAST_SECONDS


@pytest.fixture
def fabric_spec() -> dict[str, Any]:
    """The fabrics the fabric manager serves; a test parametrizes it for another size."""
    return TEST_FABRIC


@pytest.fixture
def fabric_proc(tmp_path: Path, fabric_attach_seconds: float, fabric_spec: dict[str, Any]) -> Iterator[FabricProcess]:
    config = write_config(tmp_path / "fabric.yaml", attach_seconds=fabric_attach_seconds, fabric=fabric_spec)
    proc = FabricProcess.start(config, tmp_path / "fabric.db", tmp_path, "--no-access-log")
    yield proc
    proc.terminate()


@pytest.fixture
def fabric_http(fabric_proc: FabricProcess) -> Iterator[httpx.Client]:
    with fabric_proc.client() as http:
        yield http
