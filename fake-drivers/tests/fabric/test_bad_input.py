"""Refusals: every bad request gets a 4xx with {"error": code, "message": ...} and changes nothing."""

from __future__ import annotations

import pytest
from fabric_harness import RunningFabric

UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"


def _assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    return body


def _assert_all_free(fabric: RunningFabric) -> None:
    assert fabric.client.get("/v1/attachments").json()["attachments"] == []
    states = {device["state"] for device in fabric.client.get("/v1/devices").json()["devices"]}
    assert states == {"free"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"/v1/devices/{UNKNOWN_UUID}"),
        ("POST", f"/v1/devices/{UNKNOWN_UUID}/attach"),
        ("POST", f"/v1/devices/{UNKNOWN_UUID}/detach"),
        ("POST", "/v1/devices/not-a-uuid/attach"),
    ],
)
def test_unknown_device_is_404(fabric: RunningFabric, method: str, path: str) -> None:
    body = {"node": "node-0"} if method == "POST" else None
    response = fabric.client.request(method, path, json=body)
    _assert_error(response, 404, "device_not_found")
    _assert_all_free(fabric)


def test_unknown_node_is_422(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    body = _assert_error(fabric.attach(device, "node-99"), 422, "unknown_node")
    assert "node-99" in body["message"]
    _assert_error(fabric.detach(device, "node-99"), 422, "unknown_node")
    _assert_all_free(fabric)


def test_node_not_on_the_devices_fabric_is_422(fabric: RunningFabric) -> None:
    device = fabric.on_fabric("fabric-0")[0]
    body = _assert_error(fabric.attach(device["uuid"], "node-1"), 422, "node_not_on_fabric")
    assert body["fabric"] == "fabric-0"
    assert body["nodeFabrics"] == ["fabric-1"]
    _assert_all_free(fabric)


def test_malformed_json_is_400(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    response = fabric.client.post(
        f"/v1/devices/{device}/attach", content=b'{"node": ', headers={"content-type": "application/json"}
    )
    _assert_error(response, 400, "malformed_json")
    response = fabric.client.post("/v1/faults", content=b"{mode: fail}", headers={"content-type": "application/json"})
    _assert_error(response, 400, "malformed_json")
    _assert_all_free(fabric)


@pytest.mark.parametrize(
    "body",
    [
        {},  # node missing
        {"node": ""},
        {"node": 7},
        {"nodeName": "node-0"},  # unknown key must not fall back to anything
        {"node": "node-0", "force": True},
        ["node-0"],
    ],
)
def test_invalid_attach_body_is_422_with_details(fabric: RunningFabric, body: object) -> None:
    response = fabric.client.post(f"/v1/devices/{fabric.devices[0]['uuid']}/attach", json=body)
    payload = _assert_error(response, 422, "invalid_request")
    assert payload["details"], payload
    _assert_all_free(fabric)


def test_non_json_content_type_is_415(fabric: RunningFabric) -> None:
    # What `curl -d` sends by default: the error must say how to fix it.
    response = fabric.client.post(
        f"/v1/devices/{fabric.devices[0]['uuid']}/attach",
        content=b'{"node": "node-0"}',
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    body = _assert_error(response, 415, "unsupported_media_type")
    assert "application/json" in body["message"]
    _assert_all_free(fabric)


def test_unknown_route_and_method_are_json_errors(fabric: RunningFabric) -> None:
    _assert_error(fabric.client.get("/v1/nothing"), 404, "not_found")
    _assert_error(fabric.client.delete("/v1/devices"), 405, "method_not_allowed")


def test_invalid_state_filter_is_422(fabric: RunningFabric) -> None:
    _assert_error(fabric.client.get("/v1/devices", params={"state": "busy"}), 422, "invalid_request")


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        ({"mode": "explode"}, 422, "invalid_request"),
        ({"mode": "slow"}, 422, "invalid_request"),  # slow needs delaySeconds
        ({"mode": "fail", "delaySeconds": 1}, 422, "invalid_request"),
        ({"mode": "hang", "reason": "X"}, 422, "invalid_request"),  # reason comes with the release
        ({"mode": "fail", "reason": "not a reason!"}, 422, "invalid_request"),  # condition reason syntax
        ({"mode": "fail", "count": 0}, 422, "invalid_request"),
        ({"mode": "fail", "operation": "reboot"}, 422, "invalid_request"),
        ({"mode": "fail", "device": UNKNOWN_UUID}, 422, "unknown_device"),
    ],
)
def test_invalid_fault_is_refused_and_nothing_is_armed(
    fabric: RunningFabric, fault: dict, status: int, code: str
) -> None:
    _assert_error(fabric.client.post("/v1/faults", json=fault), status, code)
    assert fabric.client.get("/v1/faults").json()["faults"] == []


def test_release_and_delete_of_unknown_things(fabric: RunningFabric) -> None:
    _assert_error(fabric.client.delete("/v1/faults/fault-404"), 404, "fault_not_found")
    _assert_error(fabric.client.post("/v1/faults/release", json={"device": UNKNOWN_UUID}), 422, "unknown_device")
    body = {"outcome": "complete", "reason": "Nope"}
    _assert_error(fabric.client.post("/v1/faults/release", json=body), 422, "invalid_request")
