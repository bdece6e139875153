"""What the nodes use: the node half of the driver marks a device it prepared for a claim and unmarks it when the
kubelet unprepares the claim; the marks last only while the device stays attached to that node (they survive a
restart of the fabric manager: the node still uses the device)."""

from __future__ import annotations

from collections.abc import Callable

from fabric_harness import RunningFabric, stop_fabric


def _uses(fabric: RunningFabric, device: str) -> list[tuple[str, str]]:
    return [(u["claim"], u["node"]) for u in fabric.device(device)["uses"]]


def test_a_use_is_marked_only_where_the_device_is_attached_and_goes_with_the_claim(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    refused = fabric.client.post(f"/v1/devices/{device}/uses", json={"claim": "uid-1", "node": "node-0"})
    assert refused.status_code == 409 and refused.json()["error"] == "not_attached_here", refused.text
    assert fabric.attach(device, "node-0").status_code == 200
    elsewhere = fabric.client.post(f"/v1/devices/{device}/uses", json={"claim": "uid-1", "node": "node-1"})
    assert elsewhere.status_code == 409, elsewhere.text
    marked = fabric.client.post(f"/v1/devices/{device}/uses", json={"claim": "uid-1", "node": "node-0"})
    assert marked.status_code == 200, marked.text
    assert [(u["claim"], u["node"]) for u in marked.json()["uses"]] == [("uid-1", "node-0")]
    listed = {d["uuid"]: d["uses"] for d in fabric.client.get("/v1/devices").json()["devices"]}
    assert [u["claim"] for u in listed[device]] == ["uid-1"] and not any(listed[d["uuid"]] for d in fabric.devices[1:])
    removed = fabric.client.delete("/v1/uses/uid-1")
    assert removed.json() == {"removed": 1}
    assert _uses(fabric, device) == []
    assert fabric.client.delete("/v1/uses/uid-1").json() == {"removed": 0}  # the kubelet may call again


def test_a_detach_ends_the_uses_and_a_restart_keeps_them(start_fabric: Callable[..., RunningFabric]) -> None:
    fabric = start_fabric()
    device, other = fabric.devices[0]["uuid"], fabric.devices[1]["uuid"]
    for uuid in (device, other):
        assert fabric.attach(uuid, "node-0").status_code == 200
        assert fabric.client.post(f"/v1/devices/{uuid}/uses", json={"claim": "uid-2", "node": "node-0"}).is_success
    assert fabric.detach(device).status_code == 200
    assert _uses(fabric, device) == []
    stop_fabric(fabric)
    again = start_fabric(db=fabric.db)
    assert _uses(again, other) == [("uid-2", "node-0")]
