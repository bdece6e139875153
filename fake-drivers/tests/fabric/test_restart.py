"""Restarts of the real ``fake-fabric-manager`` process: attachments survive, in-flight operations settle to free."""

from __future__ import annotations

import copy
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fabric_harness import TEST_FABRIC, FabricProcess, wait_until, write_config


@pytest.fixture
def processes() -> Iterator[list[FabricProcess]]:
    started: list[FabricProcess] = []
    yield started
    for process in started:
        if process.proc.poll() is None:
            process.kill()


def _start(processes: list[FabricProcess], tmp_path: Path, config: Path, *extra: str) -> FabricProcess:
    process = FabricProcess.start(config, tmp_path / "state.db", tmp_path, *extra)
    processes.append(process)
    return process


def _devices(client: httpx.Client) -> list[dict]:
    return client.get("/v1/devices").json()["devices"]


def test_attachment_survives_a_restart_of_the_process(tmp_path: Path, processes: list[FabricProcess]) -> None:
    config = write_config(tmp_path / "fabric.yaml")
    first = _start(processes, tmp_path, config)
    assert f"listening on {first.url}" in first.log.read_text()  # the line a harness may parse instead
    with first.client() as client:
        devices = _devices(client)
        device = devices[5]
        attached = client.post(f"/v1/devices/{device['uuid']}/attach", json={"node": "node-3"})
        assert attached.status_code == 200, attached.text
        before = client.get(f"/v1/devices/{device['uuid']}").json()
    assert first.terminate() in (0, -signal.SIGTERM)

    second = _start(processes, tmp_path, config)
    with second.client() as client:
        assert [d["uuid"] for d in _devices(client)] == [d["uuid"] for d in devices]  # same ids after restart
        after = client.get(f"/v1/devices/{device['uuid']}").json()
        assert (after["state"], after["node"], after["generation"]) == ("attached", "node-3", before["generation"])
        probe = client.get("/v1/attachments").json()["attachments"]
        assert [(a["device"], a["node"], a["state"]) for a in probe] == [(device["uuid"], "node-3", "attached")]
        # Still owned: another node cannot take it, the same node is a no-op.
        assert client.post(f"/v1/devices/{device['uuid']}/attach", json={"node": "node-1"}).status_code == 409
        assert client.post(f"/v1/devices/{device['uuid']}/attach", json={"node": "node-3"}).json()["changed"] is False
        assert client.get("/healthz").json()["settledAtStart"] == 0


@pytest.mark.parametrize("stop", ["kill", "terminate"])
def test_attach_in_flight_at_a_stop_is_rolled_back_to_free(
    tmp_path: Path, processes: list[FabricProcess], stop: str
) -> None:
    config = write_config(tmp_path / "fabric.yaml")
    first = _start(processes, tmp_path, config)
    with first.client() as client, ThreadPoolExecutor(1) as pool, first.client() as other:
        device = _devices(client)[0]["uuid"]
        assert client.post("/v1/faults", json={"mode": "hang", "device": device}).status_code == 201
        pending = pool.submit(other.post, f"/v1/devices/{device}/attach", json={"node": "node-0"})
        wait_until(
            lambda: client.get(f"/v1/devices/{device}").json(),
            lambda d: d["state"] == "attaching" and d["operation"]["hung"],
            what="attach hung",
        )
        if stop == "kill":
            first.kill()  # a crash: nothing settles before the process is gone
            with pytest.raises(httpx.TransportError):
                pending.result(timeout=10)
        else:
            first.terminate()  # graceful: the hung request is answered before the process exits
            response = pending.result(timeout=10)
            assert (response.status_code, response.json()["error"]) == (503, "interrupted")

    second = _start(processes, tmp_path, config)
    with second.client() as client:
        after = client.get(f"/v1/devices/{device}").json()
        assert (after["state"], after["node"]) == ("free", None)
        assert after["lastError"]["reason"] == "Interrupted"
        assert client.get("/v1/attachments").json()["attachments"] == []
        assert client.get("/healthz").json()["settledAtStart"] == (1 if stop == "kill" else 0)
        assert client.post(f"/v1/devices/{device}/attach", json={"node": "node-0"}).status_code == 200


def test_detach_in_flight_at_a_crash_is_completed_to_free(tmp_path: Path, processes: list[FabricProcess]) -> None:
    config = write_config(tmp_path / "fabric.yaml")
    first = _start(processes, tmp_path, config)
    with first.client() as client, ThreadPoolExecutor(1) as pool, first.client() as other:
        device = _devices(client)[0]["uuid"]
        assert client.post(f"/v1/devices/{device}/attach", json={"node": "node-2"}).status_code == 200
        client.post("/v1/faults", json={"mode": "hang", "operation": "detach", "device": device})
        pending = pool.submit(other.post, f"/v1/devices/{device}/detach")
        wait_until(
            lambda: client.get(f"/v1/devices/{device}").json()["state"], lambda s: s == "detaching", what="detaching"
        )
        first.kill()
        with pytest.raises(httpx.TransportError):
            pending.result(timeout=10)

    second = _start(processes, tmp_path, config)
    with second.client() as client:
        after = client.get(f"/v1/devices/{device}").json()
        assert (after["state"], after["node"], after["lastError"]["operation"]) == ("free", None, "detach")
        assert client.get("/healthz").json()["settledAtStart"] == 1


def test_config_that_would_orphan_an_attachment_is_refused(tmp_path: Path, processes: list[FabricProcess]) -> None:
    config = write_config(tmp_path / "fabric.yaml")
    first = _start(processes, tmp_path, config)
    with first.client() as client:
        device = next(d for d in _devices(client) if d["fabric"] == "fabric-1" and d["index"] == 3)
        assert client.post(f"/v1/devices/{device['uuid']}/attach", json={"node": "node-1"}).status_code == 200
    first.terminate()

    shrunk = copy.deepcopy(TEST_FABRIC)
    shrunk["fabrics"][1]["devices"][0]["count"] = 2  # drops fabric-1-fake-gpu-3, which is attached
    with pytest.raises(AssertionError, match="orphan attachments"):
        _start(processes, tmp_path, write_config(tmp_path / "shrunk.yaml", fabric=shrunk))

    # The refused start changed nothing: with the original config the attachment is still there.
    third = _start(processes, tmp_path, config)
    with third.client() as client:
        assert client.get(f"/v1/devices/{device['uuid']}").json()["state"] == "attached"


def test_a_second_manager_on_the_same_state_file_is_refused(tmp_path: Path, processes: list[FabricProcess]) -> None:
    config = write_config(tmp_path / "fabric.yaml")
    first = _start(processes, tmp_path, config)
    with pytest.raises(AssertionError, match="held by another fabric manager"):
        _start(processes, tmp_path, config)
    with first.client() as client:  # the first one is unaffected
        assert client.get("/healthz").json()["status"] == "ok"
