"""Test harness for the fabric manager: a real uvicorn server on loopback, a client, deadline polling.

A module rather than conftest-only fixtures so tests can import the types (pytest runs with importlib mode and
``pythonpath = tests/fabric``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from fake_drivers.fabric.manager import FabricManager
from fake_drivers.fabric.server import ServerThread

T = TypeVar("T")

# Short operation times keep the suite fast; tests that need a longer window pass their own.
FAST_SECONDS = 0.05

TEST_FABRIC: dict[str, Any] = {
    "fabrics": [
        {
            "id": "fabric-0",
            "nodes": ["node-0", "node-2"],
            "devices": [{"model": "fake-gpu", "count": 4, "attributes": {"vendor": "example.com", "memoryGiB": 80}}],
        },
        {
            "id": "fabric-1",
            "nodes": ["node-1", "node-3"],
            "devices": [{"model": "fake-gpu", "count": 4, "attributes": {"vendor": "example.com", "memoryGiB": 80}}],
        },
    ],
}


@dataclass
class RunningFabric:
    """One fabric manager served over HTTP on 127.0.0.1, with a client bound to it."""

    server: ServerThread
    manager: FabricManager
    client: httpx.Client
    db: Path
    devices: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def new_client(self) -> httpx.Client:
        """A separate client (own connections) for use from another thread."""
        return httpx.Client(base_url=self.url, timeout=10.0)

    def device(self, uuid: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/devices/{uuid}")
        assert response.status_code == 200, response.text
        return response.json()

    def on_fabric(self, fabric: str) -> list[dict[str, Any]]:
        return [device for device in self.devices if device["fabric"] == fabric]

    def attach(self, uuid: str, node: str, **kwargs: Any) -> httpx.Response:
        return self.client.post(f"/v1/devices/{uuid}/attach", json={"node": node}, **kwargs)

    def detach(self, uuid: str, node: str | None = None) -> httpx.Response:
        return self.client.post(f"/v1/devices/{uuid}/detach", json={"node": node} if node else None)

    def arm(self, **fault: Any) -> dict[str, Any]:
        response = self.client.post("/v1/faults", json=fault)
        assert response.status_code == 201, response.text
        return response.json()


def stop_fabric(running: RunningFabric) -> None:
    if running.client.is_closed:
        return
    running.client.close()
    running.server.stop()
    running.manager.close()


def wait_until(
    fetch: Callable[[], T], done: Callable[[T], bool], *, what: str, timeout: float = 5.0, interval: float = 0.01
) -> T:
    """Poll ``fetch`` until ``done`` holds; on timeout fail with what was expected and what was last seen."""
    deadline = time.monotonic() + timeout
    while True:
        seen = fetch()
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last seen: {seen!r}")
        time.sleep(interval)


@dataclass
class FabricProcess:
    """The installed ``fake-fabric-manager`` console script run as a real process (restart and crash tests)."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    @classmethod
    def start(cls, config: Path, db: Path, workdir: Path, *extra: str, timeout: float = 30.0) -> FabricProcess:
        script = Path(sys.executable).parent / "fake-fabric-manager"
        assert script.exists(), f"console script not installed next to {sys.executable}"
        port_file = workdir / "fabric.port"
        port_file.unlink(missing_ok=True)
        log = workdir / f"fabric-{time.monotonic_ns()}.log"
        args = [str(script), "--config", str(config), "--db", str(db), "--port", "0", "--port-file", str(port_file)]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*args, *extra],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(
            lambda: port_file.exists() or proc.poll() is not None,
            bool,
            what=f"port file of the fabric manager (log {log})",
            timeout=timeout,
        )
        if proc.poll() is not None:
            raise AssertionError(f"fabric manager exited with {proc.returncode}: {log.read_text()}")
        return cls(proc, f"http://127.0.0.1:{int(port_file.read_text())}", log)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10.0)

    def terminate(self, timeout: float = 15.0) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout)

    def kill(self) -> int:
        self.proc.kill()
        return self.proc.wait(10)


def write_config(path: Path, attach_seconds: float = FAST_SECONDS, fabric: dict[str, Any] | None = None) -> Path:
    document = {**(fabric or TEST_FABRIC), "attachSeconds": attach_seconds, "detachSeconds": attach_seconds}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path
