"""Attach/detach over HTTP: states seen during the operation, the probe, idempotency and conflicts."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fabric_harness import RunningFabric, wait_until


def test_attach_takes_the_configured_time_and_shows_attaching_meanwhile(
    start_fabric: Callable[..., RunningFabric],
) -> None:
    fabric = start_fabric(attach_seconds=0.6)
    device = fabric.devices[0]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        started = time.monotonic()
        pending = pool.submit(other.post, f"/v1/devices/{device}/attach", json={"node": "node-0"})
        during = wait_until(lambda: fabric.device(device), lambda d: d["state"] == "attaching", what="device attaching")
        assert during["node"] == "node-0"
        assert during["operation"]["operation"] == "attach"
        assert during["operation"]["hung"] is False
        probe = fabric.client.get("/v1/attachments").json()["attachments"]
        assert [(a["device"], a["node"], a["state"]) for a in probe] == [(device, "node-0", "attaching")]
        response = pending.result(timeout=10)
        elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert elapsed >= 0.6
    body = response.json()
    assert body["changed"] is True
    assert body["device"]["state"] == "attached"
    assert body["device"]["node"] == "node-0"
    assert body["device"]["operation"] is None
    probe = fabric.client.get("/v1/attachments").json()["attachments"]
    assert [(a["device"], a["node"], a["state"]) for a in probe] == [(device, "node-0", "attached")]


def test_detach_frees_the_device_and_clears_the_probe(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    assert fabric.attach(device, "node-2").status_code == 200
    response = fabric.detach(device)
    assert response.status_code == 200, response.text
    assert response.json()["changed"] is True
    assert response.json()["device"]["state"] == "free"
    assert response.json()["device"]["node"] is None
    assert fabric.client.get("/v1/attachments").json()["attachments"] == []
    # Free again: another node of the fabric can have it.
    assert fabric.attach(device, "node-0").json()["device"]["node"] == "node-0"


def test_attach_to_the_same_node_again_is_a_200_no_op(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    first = fabric.attach(device, "node-0").json()["device"]
    # An armed fault would fire on a real operation; a no-op must not consume it.
    fault = fabric.arm(mode="fail", device=device)
    again = fabric.attach(device, "node-0")
    assert again.status_code == 200, again.text
    assert again.json()["changed"] is False
    assert again.json()["device"]["state"] == "attached"
    assert again.json()["device"]["generation"] == first["generation"]
    assert again.json()["device"]["stateSince"] == first["stateSince"]
    assert [f["id"] for f in fabric.client.get("/v1/faults").json()["faults"]] == [fault["id"]]


def test_detach_of_a_free_device_is_a_200_no_op(fabric: RunningFabric) -> None:
    device = fabric.devices[0]
    for node in (None, "node-0"):
        response = fabric.detach(device["uuid"], node)
        assert response.status_code == 200, response.text
        assert response.json()["changed"] is False
        assert response.json()["device"]["state"] == "free"
        assert response.json()["device"]["generation"] == device["generation"]


def test_attach_of_a_device_attached_elsewhere_is_409(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    assert fabric.attach(device, "node-0").status_code == 200
    response = fabric.attach(device, "node-2")
    assert response.status_code == 409, response.text
    assert response.json()["error"] == "attached_elsewhere"
    assert response.json()["device"]["node"] == "node-0"
    assert fabric.device(device)["node"] == "node-0"


def test_detach_naming_another_node_is_409_and_keeps_the_attachment(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    assert fabric.attach(device, "node-0").status_code == 200
    response = fabric.detach(device, "node-2")
    assert response.status_code == 409, response.text
    assert response.json()["error"] == "attached_elsewhere"
    assert fabric.device(device)["state"] == "attached"
    assert fabric.detach(device, "node-0").json()["device"]["state"] == "free"


def test_requests_during_an_operation_get_409_operation_in_progress(
    start_fabric: Callable[..., RunningFabric],
) -> None:
    fabric = start_fabric(attach_seconds=0.5, detach_seconds=0.5)
    device = fabric.devices[0]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        pending = pool.submit(other.post, f"/v1/devices/{device}/attach", json={"node": "node-0"})
        wait_until(lambda: fabric.device(device)["state"], lambda s: s == "attaching", what="attaching")
        for response in (fabric.attach(device, "node-0"), fabric.attach(device, "node-2"), fabric.detach(device)):
            assert response.status_code == 409, response.text
            assert response.json()["error"] == "operation_in_progress"
        assert pending.result(timeout=10).status_code == 200

        pending = pool.submit(other.post, f"/v1/devices/{device}/detach")
        wait_until(lambda: fabric.device(device)["state"], lambda s: s == "detaching", what="detaching")
        for response in (fabric.attach(device, "node-0"), fabric.detach(device)):
            assert response.status_code == 409, response.text
            assert response.json()["error"] == "operation_in_progress"
        assert pending.result(timeout=10).json()["device"]["state"] == "free"


def test_listing_filters_by_fabric_state_and_node(fabric: RunningFabric) -> None:
    target = fabric.on_fabric("fabric-1")[2]["uuid"]
    assert fabric.attach(target, "node-3").status_code == 200

    def uuids(**params: str) -> set[str]:
        return {d["uuid"] for d in fabric.client.get("/v1/devices", params=params).json()["devices"]}

    assert uuids(fabric="fabric-1") == {d["uuid"] for d in fabric.on_fabric("fabric-1")}
    assert uuids(state="attached") == {target}
    assert uuids(fabric="fabric-0", state="attached") == set()
    assert uuids(node="node-3") == {target}
    assert len(uuids(state="free")) == 7
    on_node = fabric.client.get("/v1/attachments", params={"node": "node-3"}).json()["attachments"]
    assert [a["device"] for a in on_node] == [target]

    summary = {f["id"]: f for f in fabric.client.get("/v1/fabrics").json()["fabrics"]}
    assert summary["fabric-1"]["nodes"] == ["node-1", "node-3"]
    assert summary["fabric-1"]["models"]["fake-gpu"] == {
        "free": 3,
        "attaching": 0,
        "attached": 1,
        "detaching": 0,
        "total": 4,
    }
    assert summary["fabric-0"]["models"]["fake-gpu"]["free"] == 4


def test_healthz_and_loopback_bind(fabric: RunningFabric) -> None:
    health = fabric.client.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "devices": 8, "inFlight": 0, "settledAtStart": 0}
    assert fabric.url.startswith("http://127.0.0.1:")
    bound = fabric.server.server.servers[0].sockets[0].getsockname()
    assert bound[0] == "127.0.0.1"


def test_a_client_that_gives_up_mid_attach_does_not_leave_the_device_attaching(
    start_fabric: Callable[..., RunningFabric],
) -> None:
    fabric = start_fabric(attach_seconds=0.5)
    device = fabric.devices[0]["uuid"]
    with fabric.new_client() as impatient, pytest.raises(httpx.ReadTimeout):
        impatient.post(f"/v1/devices/{device}/attach", json={"node": "node-0"}, timeout=0.1)
    # The fabric operation is not tied to the connection: it completes and the device ends attached.
    after = wait_until(lambda: fabric.device(device), lambda d: d["state"] != "attaching", what="attach to settle")
    assert (after["state"], after["node"]) == ("attached", "node-0")
