"""Fault injection: fail, hang + release, slow; counts, precedence, clearing; detach faults."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fabric_harness import RunningFabric, wait_until


def _faults(fabric: RunningFabric) -> dict[str, Any]:
    return fabric.client.get("/v1/faults").json()


def test_fail_fault_fails_the_next_attach_with_its_reason_and_leaves_the_device_free(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    fault = fabric.arm(mode="fail", device=device, reason="FabricLinkDown", message="link 3 lost")
    assert fault["remaining"] == 1

    response = fabric.attach(device, "node-0")
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error"] == "attach_failed"
    assert body["reason"] == "FabricLinkDown"
    assert "link 3 lost" in body["message"]
    assert body["device"]["state"] == "free"
    after = fabric.device(device)
    assert after["state"] == "free"
    assert after["node"] is None
    assert after["lastError"]["operation"] == "attach"
    assert after["lastError"]["reason"] == "FabricLinkDown"
    assert fabric.client.get("/v1/attachments").json()["attachments"] == []
    assert _faults(fabric)["faults"] == []  # used up

    retry = fabric.attach(device, "node-0")
    assert retry.status_code == 200, retry.text
    assert retry.json()["device"]["lastError"] is None


def test_count_limits_how_many_operations_fail(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    fault = fabric.arm(mode="fail", device=device, count=2)
    assert fabric.attach(device, "node-0").status_code == 503
    armed = _faults(fabric)["faults"]
    assert [(f["id"], f["remaining"], f["used"]) for f in armed] == [(fault["id"], 1, 1)]
    assert fabric.attach(device, "node-0").status_code == 503
    assert fabric.attach(device, "node-0").status_code == 200


def test_any_device_fault_applies_to_every_device_and_a_device_fault_wins(fabric: RunningFabric) -> None:
    first, second = fabric.devices[0]["uuid"], fabric.devices[1]["uuid"]
    fabric.arm(mode="fail", reason="AnyDevice", count=5)
    fabric.arm(mode="fail", device=second, reason="ThisDevice")
    assert fabric.attach(first, "node-0").json()["reason"] == "AnyDevice"
    assert fabric.attach(second, "node-0").json()["reason"] == "ThisDevice"
    assert fabric.attach(second, "node-0").json()["reason"] == "AnyDevice"
    remaining = _faults(fabric)["faults"]
    assert [(f["device"], f["remaining"]) for f in remaining] == [(None, 3)]


def test_clear_disarms_all_faults(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    fabric.arm(mode="fail", device=device)
    fabric.arm(mode="hang")
    assert fabric.client.delete("/v1/faults").json() == {"cleared": 2}
    assert _faults(fabric) == {"faults": [], "hung": []}
    assert fabric.attach(device, "node-0").status_code == 200


def test_delete_one_fault(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    fault = fabric.arm(mode="fail", device=device)
    deleted = fabric.client.delete(f"/v1/faults/{fault['id']}")
    assert deleted.status_code == 200
    assert deleted.json()["id"] == fault["id"]
    assert fabric.attach(device, "node-0").status_code == 200


def _hang(fabric: RunningFabric, pool: ThreadPoolExecutor, client: httpx.Client, device: str) -> Future[httpx.Response]:
    """Arm a hang, start an attach in the background and wait until the manager reports it hung."""
    fabric.arm(mode="hang", device=device)
    pending = pool.submit(client.post, f"/v1/devices/{device}/attach", json={"node": "node-0"})
    wait_until(
        lambda: fabric.device(device),
        lambda d: d["state"] == "attaching" and d["operation"] is not None and d["operation"]["hung"],
        what="attach hung",
    )
    return pending


@pytest.mark.parametrize("scope", ["device", "all"])
def test_hung_attach_waits_until_released_then_completes(fabric: RunningFabric, scope: str) -> None:
    device = fabric.devices[0]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        pending = _hang(fabric, pool, other, device)
        hung = _faults(fabric)["hung"]
        assert [(h["device"], h["operation"], h["node"]) for h in hung] == [(device, "attach", "node-0")]
        # Other devices attach and detach meanwhile (several normal attach times pass); this one still hangs.
        bystander = fabric.devices[1]["uuid"]
        for _ in range(3):
            assert fabric.attach(bystander, "node-0").status_code == 200
            assert fabric.detach(bystander).status_code == 200
        assert not pending.done()
        assert fabric.device(device)["state"] == "attaching"

        release = {"device": device} if scope == "device" else {}
        released = fabric.client.post("/v1/faults/release", json=release)
        assert released.status_code == 200, released.text
        assert [r["device"] for r in released.json()["released"]] == [device]
        response = pending.result(timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["device"]["state"] == "attached"
    assert _faults(fabric)["hung"] == []


def test_hung_attach_released_as_failed_fails_with_the_release_reason(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        pending = _hang(fabric, pool, other, device)
        release = {"device": device, "outcome": "fail", "reason": "AttachTimedOut", "message": "gave up"}
        assert fabric.client.post("/v1/faults/release", json=release).status_code == 200
        response = pending.result(timeout=10)
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "attach_failed"
    assert response.json()["reason"] == "AttachTimedOut"
    assert fabric.device(device)["state"] == "free"
    assert fabric.device(device)["lastError"]["reason"] == "AttachTimedOut"


def test_release_of_another_device_leaves_the_hung_one_alone(fabric: RunningFabric) -> None:
    device, other_device = fabric.devices[0]["uuid"], fabric.devices[1]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        pending = _hang(fabric, pool, other, device)
        response = fabric.client.post("/v1/faults/release", json={"device": other_device})
        assert response.json() == {"released": []}
        assert not pending.done()
        assert fabric.client.post("/v1/faults/release").json()["released"][0]["device"] == device
        assert pending.result(timeout=10).status_code == 200


def test_clear_does_not_release_a_hung_attach(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        pending = _hang(fabric, pool, other, device)
        assert fabric.client.delete("/v1/faults").json() == {"cleared": 0}
        assert [h["device"] for h in _faults(fabric)["hung"]] == [device]
        assert not pending.done()
        fabric.client.post("/v1/faults/release")
        assert pending.result(timeout=10).status_code == 200


def test_slow_fault_adds_its_delay_then_completes(start_fabric: Callable[..., RunningFabric]) -> None:
    fabric = start_fabric(attach_seconds=0.05)
    device = fabric.devices[0]["uuid"]
    fabric.arm(mode="slow", device=device, delaySeconds=0.5)
    started = time.monotonic()
    response = fabric.attach(device, "node-0")
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert response.json()["device"]["state"] == "attached"
    assert elapsed >= 0.55
    # Only the next attach was slow.
    other = fabric.devices[1]["uuid"]
    started = time.monotonic()
    assert fabric.attach(other, "node-0").status_code == 200
    assert time.monotonic() - started < 0.5


def test_detach_fault_fails_the_detach_and_keeps_the_attachment(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    fabric.arm(mode="fail", operation="detach", device=device, reason="DeviceBusy")
    assert fabric.attach(device, "node-0").status_code == 200  # attach faults only: unaffected
    response = fabric.detach(device)
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "detach_failed"
    assert response.json()["reason"] == "DeviceBusy"
    after = fabric.device(device)
    assert (after["state"], after["node"], after["lastError"]["operation"]) == ("attached", "node-0", "detach")
    assert fabric.detach(device).json()["device"]["state"] == "free"


def test_stopping_the_server_interrupts_a_hung_attach_and_frees_the_device(
    start_fabric: Callable[..., RunningFabric],
) -> None:
    fabric = start_fabric()
    device = fabric.devices[0]["uuid"]
    with ThreadPoolExecutor(1) as pool, fabric.new_client() as other:
        pending = _hang(fabric, pool, other, device)
        stopped = time.monotonic()
        fabric.server.stop()
        response = pending.result(timeout=10)
    assert time.monotonic() - stopped < 5  # not blocked by the hung request
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "interrupted"
    assert response.json()["device"]["state"] == "free"
    fabric.client.close()
    fabric.manager.close()

    restarted = start_fabric(db=fabric.db)
    after = restarted.device(device)
    assert after["state"] == "free"
    assert after["lastError"]["reason"] == "Interrupted"
