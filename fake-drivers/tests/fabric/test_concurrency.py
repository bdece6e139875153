"""Many clients racing for one device over real sockets: exactly one wins, the others are refused at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
from fabric_harness import RunningFabric

CLIENTS = 24


def _race(fabric: RunningFabric, device: str, nodes: list[str]) -> list[tuple[httpx.Response, float]]:
    """Every client has its own connection and fires at the same barrier; returns responses with their arrival time."""
    barrier = threading.Barrier(len(nodes))
    clients = [fabric.new_client() for _ in nodes]
    for client in clients:  # open the connections first, so the race is about the attach, not the TCP handshake
        assert client.get("/healthz").status_code == 200

    def attach(client: httpx.Client, node: str) -> tuple[httpx.Response, float]:
        barrier.wait(timeout=10)
        response = client.post(f"/v1/devices/{device}/attach", json={"node": node})
        return response, time.monotonic()

    try:
        with ThreadPoolExecutor(len(nodes)) as pool:
            futures = [pool.submit(attach, client, node) for client, node in zip(clients, nodes, strict=True)]
            return [future.result(timeout=30) for future in futures]
    finally:
        for client in clients:
            client.close()


def test_concurrent_attach_of_one_free_device_has_exactly_one_winner(
    start_fabric: Callable[..., RunningFabric],
) -> None:
    # The attach time is long compared with the burst, so every loser arrives while the winner is attaching.
    fabric = start_fabric(attach_seconds=1.0)
    device = fabric.on_fabric("fabric-0")[0]["uuid"]
    nodes = ["node-0" if i % 2 else "node-2" for i in range(CLIENTS)]
    results = _race(fabric, device, nodes)

    winners = [(r, t) for r, t in results if r.status_code == 200]
    losers = [(r, t) for r, t in results if r.status_code != 200]
    assert len(winners) == 1, [r.status_code for r, _ in results]
    assert len(losers) == CLIENTS - 1
    assert {r.status_code for r, _ in losers} == {409}, [r.text for r, _ in losers]
    assert {r.json()["error"] for r, _ in losers} == {"operation_in_progress"}
    # Refused at once: every 409 came back before the winner's attach finished.
    winner_done = winners[0][1]
    assert max(t for _, t in losers) < winner_done

    winner = winners[0][0].json()["device"]
    assert winner["state"] == "attached"
    attachments = fabric.client.get("/v1/attachments").json()["attachments"]
    assert [(a["device"], a["node"]) for a in attachments] == [(device, winner["node"])]


def test_concurrent_attach_to_the_node_it_is_on_is_idempotent_for_all(fabric: RunningFabric) -> None:
    device = fabric.on_fabric("fabric-1")[1]["uuid"]
    assert fabric.attach(device, "node-1").status_code == 200
    generation = fabric.device(device)["generation"]
    results = _race(fabric, device, ["node-1"] * CLIENTS)
    assert [r.status_code for r, _ in results] == [200] * CLIENTS
    assert {r.json()["changed"] for r, _ in results} == {False}
    assert fabric.device(device)["generation"] == generation


def test_concurrent_attaches_of_different_devices_all_succeed(fabric: RunningFabric) -> None:
    targets = [(d["uuid"], "node-0" if d["fabric"] == "fabric-0" else "node-1") for d in fabric.devices]

    def attach(target: tuple[str, str]) -> httpx.Response:
        with fabric.new_client() as client:
            return client.post(f"/v1/devices/{target[0]}/attach", json={"node": target[1]})

    with ThreadPoolExecutor(len(targets)) as pool:
        responses = list(pool.map(attach, targets, timeout=30))
    assert [r.status_code for r in responses] == [200] * len(targets)
    attachments = fabric.client.get("/v1/attachments").json()["attachments"]
    assert sorted((a["device"], a["node"]) for a in attachments) == sorted(targets)
