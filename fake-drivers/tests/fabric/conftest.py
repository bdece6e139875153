"""Fixtures for the fabric manager tests (helpers live in fabric_harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fabric_harness import FAST_SECONDS, TEST_FABRIC, RunningFabric, stop_fabric

from fake_drivers.fabric.config import FabricConfig, build_config
from fake_drivers.fabric.manager import FabricManager
from fake_drivers.fabric.server import ServerThread
from fake_drivers.fabric.store import Store


@pytest.fixture
def fabric_config() -> FabricConfig:
    return build_config({**TEST_FABRIC, "attachSeconds": FAST_SECONDS, "detachSeconds": FAST_SECONDS})


@pytest.fixture
def start_fabric(tmp_path: Path, fabric_config: FabricConfig) -> Iterator[Callable[..., RunningFabric]]:
    """Factory: start a server (optionally on a given DB and operation times); all are stopped at teardown."""
    started: list[RunningFabric] = []

    def start(
        *, db: Path | None = None, attach_seconds: float | None = None, detach_seconds: float | None = None
    ) -> RunningFabric:
        db = db or tmp_path / "fabric.db"
        manager = FabricManager(fabric_config, Store(db), attach_seconds=attach_seconds, detach_seconds=detach_seconds)
        server = ServerThread(manager).start()
        client = httpx.Client(base_url=server.url, timeout=10.0)
        running = RunningFabric(server, manager, client, db)
        running.devices = client.get("/v1/devices").json()["devices"]
        started.append(running)
        return running

    yield start
    for running in reversed(started):
        stop_fabric(running)


@pytest.fixture
def fabric(start_fabric: Callable[..., RunningFabric]) -> RunningFabric:
    return start_fabric()
