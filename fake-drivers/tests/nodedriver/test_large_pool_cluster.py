"""The node driver's pools past 128 devices against a real kube-apiserver: a node with 200 local devices, and a
node whose pool crosses the 128 boundary when devices are hot-plugged and shrinks back when they leave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from conformance.cluster.waits import wait_for
from kubernetes import client
from nodedriver_harness import NodeDriverProcess

from fake_drivers.dra import RESOURCE_GROUP, RESOURCE_VERSION
from fake_drivers.pools import pool_problem

DEADLINE_S = 30.0
LOCAL = {"node-0": 125, "node-1": 200}  # fabric-0 (4 devices) reaches node-0: 125 + 4 crosses 128


def local(node: str) -> list[str]:
    return [f"local-fake-gpu-{i}" for i in range(LOCAL.get(node, 0))]


def node_pool(api: client.CustomObjectsApi, driver: str, node: str) -> list[dict[str, Any]]:
    items = api.list_cluster_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", field_selector=f"spec.driver={driver},spec.nodeName={node}"
    )["items"]
    return items


def wait_node_pool(api: client.CustomObjectsApi, driver: str, node: str, names: list[str]) -> list[dict[str, Any]]:
    return wait_for(
        lambda: node_pool(api, driver, node),
        lambda slices: not pool_problem(slices, names),
        timeout=DEADLINE_S,
        expected=f"{node}'s pool with exactly {len(names)} devices",
        describe=lambda slices: pool_problem(slices or [], names),
    )


def test_node_pools_past_128_devices_are_split_grow_with_hot_plug_and_shrink_back(
    start_node_driver: Callable[..., NodeDriverProcess],
    slices_api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
) -> None:
    nodes = {node: {"local": [{"model": "fake-gpu", "count": LOCAL[node]}]} for node in LOCAL}
    proc = start_node_driver("--republish", nodes={**nodes, "node-2": {}, "node-3": {}})
    big = wait_node_pool(slices_api, driver, "node-1", local("node-1"))
    assert [len(s["spec"]["devices"]) for s in sorted(big, key=lambda s: s["metadata"]["name"])] == [128, 72]
    assert {s["spec"]["pool"]["name"] for s in big} == {"node-1"}
    [before] = wait_node_pool(slices_api, driver, "node-0", local("node-0"))

    hot = fabric_http.get("/v1/devices", params={"fabric": "fabric-0"}).json()["devices"]
    for device in hot:
        fabric_http.post(f"/v1/devices/{device['uuid']}/attach", json={"node": "node-0"}).raise_for_status()
    grown = wait_node_pool(slices_api, driver, "node-0", local("node-0") + [d["name"] for d in hot])
    assert len(grown) == 2
    for device in hot:
        fabric_http.post(f"/v1/devices/{device['uuid']}/detach").raise_for_status()
    [after] = wait_node_pool(slices_api, driver, "node-0", local("node-0"))
    assert after["metadata"]["name"] == before["metadata"]["name"], "the first slice keeps its name"
    assert after["spec"]["pool"]["generation"] > grown[0]["spec"]["pool"]["generation"]

    assert proc.stop() == 0
    left = [s["metadata"]["name"] for node in LOCAL for s in node_pool(slices_api, driver, node)]
    assert not left, f"slices left after shutdown: {left}"
