"""Faults selected by model, fabric or node (count-based pools: the client cannot know the physical device in
advance), the record of what each fault hit, release by fault id, and the probe's free counts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fabric_harness import RunningFabric, wait_until


def _fault(fabric: RunningFabric, fault_id: str) -> dict[str, Any]:
    response = fabric.client.get(f"/v1/faults/{fault_id}")
    assert response.status_code == 200, response.text
    return response.json()


def test_node_fault_hits_only_attaches_to_that_node_and_records_the_device(fabric: RunningFabric) -> None:
    first, second = (d["uuid"] for d in fabric.on_fabric("fabric-0")[:2])
    fault = fabric.arm(mode="fail", node="node-2", reason="NodeLinkDown")
    assert (fault["node"], fault["device"], fault["hits"]) == ("node-2", None, [])

    assert fabric.attach(first, "node-0").status_code == 200  # another node: not hit
    failed = fabric.attach(second, "node-2")
    assert failed.status_code == 503, failed.text
    assert failed.json()["reason"] == "NodeLinkDown"

    spent = _fault(fabric, fault["id"])  # used up, still readable
    assert spent["remaining"] == 0
    assert [(h["device"], h["node"], h["fabric"], h["model"]) for h in spent["hits"]] == [
        (second, "node-2", "fabric-0", "fake-gpu")
    ]
    # Not armed any more: DELETE says so, as for any used-up fault.
    assert fabric.client.delete(f"/v1/faults/{fault['id']}").status_code == 404


def test_fabric_and_model_selectors_combine(fabric: RunningFabric) -> None:
    on_0, on_1 = fabric.on_fabric("fabric-0")[0]["uuid"], fabric.on_fabric("fabric-1")[0]["uuid"]
    fault = fabric.arm(mode="fail", fabric="fabric-1", model="fake-gpu", count=2)
    assert fabric.attach(on_0, "node-0").status_code == 200
    assert fabric.attach(on_1, "node-1").status_code == 503
    hits = _fault(fabric, fault["id"])["hits"]
    assert [(h["device"], h["fabric"]) for h in hits] == [(on_1, "fabric-1")]


def test_more_specific_fault_wins_and_device_fault_wins_over_selectors(fabric: RunningFabric) -> None:
    first, second = (d["uuid"] for d in fabric.on_fabric("fabric-0")[:2])
    broad = fabric.arm(mode="fail", reason="Broad", count=10)
    narrow = fabric.arm(mode="fail", fabric="fabric-0", node="node-0", reason="Narrow")
    exact = fabric.arm(mode="fail", device=second, reason="Exact")
    assert fabric.attach(second, "node-0").json()["reason"] == "Exact"
    assert fabric.attach(first, "node-0").json()["reason"] == "Narrow"
    assert fabric.attach(first, "node-0").json()["reason"] == "Broad"
    assert [len(_fault(fabric, f["id"])["hits"]) for f in (broad, narrow, exact)] == [1, 1, 1]


def test_disarmed_fault_keeps_its_hits(fabric: RunningFabric) -> None:
    device = fabric.devices[0]["uuid"]
    fault = fabric.arm(mode="fail", model="fake-gpu", count=3)
    assert fabric.attach(device, "node-0").status_code == 503
    deleted = fabric.client.delete(f"/v1/faults/{fault['id']}")
    assert deleted.status_code == 200
    assert [h["device"] for h in deleted.json()["hits"]] == [device]
    assert [h["device"] for h in _fault(fabric, fault["id"])["hits"]] == [device]
    assert fabric.attach(device, "node-0").status_code == 200


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ({"model": "no-such-gpu"}, "unknown_model"),
        ({"fabric": "fabric-9"}, "unknown_fabric"),
        ({"node": "nx"}, "unknown_node"),
    ],
)
def test_selector_naming_nothing_is_refused(fabric: RunningFabric, selector: dict[str, str], error: str) -> None:
    response = fabric.client.post("/v1/faults", json={"mode": "fail", **selector})
    assert response.status_code == 422, response.text
    assert response.json()["error"] == error


def test_unknown_fault_is_404(fabric: RunningFabric) -> None:
    assert fabric.client.get("/v1/faults/fault-999").json()["error"] == "fault_not_found"
    response = fabric.client.post("/v1/faults/release", json={"fault": "fault-999"})
    assert (response.status_code, response.json()["error"]) == (404, "fault_not_found")


def test_release_by_fault_id_lets_only_that_faults_operations_go(fabric: RunningFabric) -> None:
    first, second = (d["uuid"] for d in fabric.on_fabric("fabric-0")[:2])
    by_node = fabric.arm(mode="hang", node="node-2")
    by_device = fabric.arm(mode="hang", device=second)
    with ThreadPoolExecutor(2) as pool, fabric.new_client() as a, fabric.new_client() as b:
        pending_first = pool.submit(a.post, f"/v1/devices/{first}/attach", json={"node": "node-2"})
        pending_second = pool.submit(b.post, f"/v1/devices/{second}/attach", json={"node": "node-0"})
        wait_until(
            lambda: fabric.client.get("/v1/faults").json()["hung"],
            lambda hung: len(hung) == 2,
            what="both attaches hung",
        )
        # The node fault's record tells which physical device it made hang.
        assert [h["device"] for h in _fault(fabric, by_node["id"])["hits"]] == [first]
        released = fabric.client.post("/v1/faults/release", json={"fault": by_node["id"], "outcome": "fail"})
        assert [(r["device"], r["fault"]) for r in released.json()["released"]] == [(first, by_node["id"])]
        assert pending_first.result(timeout=10).status_code == 503
        assert not pending_second.done()
        fabric.client.post("/v1/faults/release", json={"fault": by_device["id"]})
        assert pending_second.result(timeout=10).status_code == 200


def test_probe_reports_free_devices_per_fabric_and_model(fabric: RunningFabric) -> None:
    device = fabric.on_fabric("fabric-0")[0]["uuid"]
    assert fabric.attach(device, "node-2").status_code == 200
    probe = fabric.client.get("/v1/attachments").json()
    assert [a["device"] for a in probe["attachments"]] == [device]
    assert probe["free"] == [
        {"fabric": "fabric-0", "model": "fake-gpu", "free": 3, "total": 4, "nodes": ["node-0", "node-2"]},
        {"fabric": "fabric-1", "model": "fake-gpu", "free": 4, "total": 4, "nodes": ["node-1", "node-3"]},
    ]
    # A node selects the fabrics that reach it; a fabric only itself.
    assert [f["fabric"] for f in fabric.client.get("/v1/attachments?node=node-3").json()["free"]] == ["fabric-1"]
    assert [f["fabric"] for f in fabric.client.get("/v1/attachments?fabric=fabric-0").json()["free"]] == ["fabric-0"]
