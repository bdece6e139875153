"""The readiness probe (GET /v1/readiness) the fabric manager serves for a node-local readiness gate: per device,
ready or not, on which node, since when; readying is an attach to the device's node."""

from __future__ import annotations

from fabric_harness import RunningFabric


def test_a_device_is_ready_on_its_node_once_its_attach_completed(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    before = {d["device"]: d for d in fabric.client.get("/v1/readiness").json()["devices"]}
    assert (
        before[device]["ready"] is False and before[device]["state"] == "unprepared" and before[device]["node"] is None
    )
    response = fabric.client.post(f"/v1/devices/{device}/attach", json={"node": "node-0"})
    assert response.status_code == 200, response.text
    after = {d["device"]: d for d in fabric.client.get("/v1/readiness").json()["devices"]}
    assert (after[device]["ready"], after[device]["state"], after[device]["node"]) == (True, "ready", "node-0")
    assert after[device]["since"] >= before[device]["since"]


def test_node_selects_the_devices_that_can_be_readied_there(fabric: RunningFabric) -> None:
    on_node_1 = fabric.client.get("/v1/readiness", params={"node": "node-1"}).json()["devices"]
    fabrics = {d["uuid"]: d["fabric"] for d in fabric.devices}
    assert on_node_1 and {fabrics[d["device"]] for d in on_node_1} == {"fabric-1"}
