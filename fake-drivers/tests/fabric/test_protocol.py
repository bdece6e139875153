"""The published probe/fault protocol document, and the worked adapter example that serves the probe from the
fabric manager's own inventory API (a real fabric manager and a real adapter process on loopback)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
from fabric_harness import RunningFabric, wait_until

from fake_drivers.fabric.protocol import protocol_openapi

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "fabric-protocols.openapi.json"
ADAPTER = ROOT / "fake-drivers" / "examples" / "probe_adapter.py"


def test_published_protocol_document_is_the_managers_schema(tmp_path: Path) -> None:
    assert json.loads(DOC.read_text()) == json.loads(json.dumps(protocol_openapi(tmp_path))), (
        f"regenerate it: python -m fake_drivers.fabric.protocol > {DOC}"
    )
    assert {"/v1/attachments", "/v1/faults", "/v1/faults/release"} <= set(json.loads(DOC.read_text())["paths"])


def _view(body: dict) -> tuple[set[tuple[str, str, str]], dict[tuple[str, str], tuple[int, int, list[str]]]]:
    attached = {(a["device"], a["node"], a["state"]) for a in body["attachments"]}
    free = {(f["fabric"], f["model"]): (f["free"], f["total"], sorted(f["nodes"])) for f in body["free"]}
    return attached, free


def test_adapter_answers_what_the_fabric_says(start_fabric: Callable[..., RunningFabric], tmp_path: Path) -> None:
    fabric = start_fabric()
    device = fabric.devices[0]
    assert fabric.attach(device["uuid"], "node-0").status_code < 300
    wait_until(lambda: fabric.device(device["uuid"])["state"], lambda s: s == "attached", what="the attach")
    port_file = tmp_path / "adapter.port"
    adapter = subprocess.Popen([sys.executable, str(ADAPTER), "--manager", fabric.url, "--port-file", str(port_file)])
    try:
        port = wait_until(lambda: port_file.exists() and port_file.read_text(), bool, what="the adapter's port")
        through_adapter = httpx.get(f"http://127.0.0.1:{port}/v1/attachments", timeout=10).json()
        direct = fabric.client.get("/v1/attachments").json()
        assert _view(through_adapter) == _view(direct)
        assert (device["uuid"], "node-0", "attached") in _view(through_adapter)[0]
    finally:
        adapter.terminate()
        adapter.wait(10)
