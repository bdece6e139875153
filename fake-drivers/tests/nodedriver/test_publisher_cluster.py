"""The node driver against a real kube-apiserver and a real fabric manager: slices appear, follow attach and
detach (hot-plug), honour the deny list, bump the pool generation, follow nodes joining and leaving and disappear on
shutdown."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import device, resource_slice
from conformance.cluster.nodes import fake_node
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import wait_for
from kubernetes import client
from nodedriver_harness import NODES_CONFIG, NodeDriverProcess, driver_slices, uuids

from fake_drivers.dra import slice_name

NODES = sorted(NODES_CONFIG["nodes"])
DEADLINE_S = 10.0


def fabric_device(http: httpx.Client, fabric: str, index: int) -> dict:
    devices = http.get("/v1/devices", params={"fabric": fabric}).json()["devices"]
    return sorted(devices, key=lambda d: d["name"])[index]


def attach(http: httpx.Client, dev: dict, node: str) -> None:
    response = http.post(f"/v1/devices/{dev['uuid']}/attach", json={"node": node})
    assert response.status_code == 200, response.text


def slices_until(api: client.CustomObjectsApi, driver: str, done: Callable[[dict], bool], expected: str) -> dict:
    return wait_for(lambda: driver_slices(api, driver), done, timeout=DEADLINE_S, expected=expected)


def test_one_slice_per_node_with_its_local_devices(
    start_node_driver: Callable[..., NodeDriverProcess], slices_api: client.CustomObjectsApi, driver: str
) -> None:
    start_node_driver()
    slices = slices_until(slices_api, driver, lambda s: sorted(s) == NODES, f"one slice per node {NODES}")
    for node in NODES:
        spec = slices[node]["spec"]
        assert slices[node]["metadata"]["name"] == slice_name(driver, node)
        assert spec["pool"] == {"name": node, "generation": 1, "resourceSliceCount": 1}
        wanted = ["local-fake-gpu-0"] if NODES_CONFIG["nodes"][node] else []
        assert [d["name"] for d in spec.get("devices", [])] == wanted


def test_hot_plug_follows_attach_and_detach_and_bumps_generation(
    start_node_driver: Callable[..., NodeDriverProcess],
    slices_api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
) -> None:
    start_node_driver("--republish")
    before = slices_until(slices_api, driver, lambda s: "node-2" in s, "the slice of node-2")
    generation = before["node-2"]["spec"]["pool"]["generation"]
    dev = fabric_device(fabric_http, "fabric-0", 0)

    attach(fabric_http, dev, "node-2")
    after = slices_until(
        slices_api,
        driver,
        lambda s: dev["uuid"] in uuids(s.get("node-2")),
        f"device {dev['name']} ({dev['uuid']}) in node-2's slice after attach",
    )
    published = next(d for d in after["node-2"]["spec"]["devices"] if d["name"] == dev["name"])
    assert published["attributes"]["model"] == {"string": dev["model"]}
    assert after["node-2"]["spec"]["pool"]["generation"] == generation + 1
    assert all(dev["uuid"] not in uuids(after[n]) for n in NODES if n != "node-2")

    assert fabric_http.post(f"/v1/devices/{dev['uuid']}/detach").status_code == 200
    gone = slices_until(
        slices_api,
        driver,
        lambda s: dev["uuid"] not in uuids(s.get("node-2")),
        f"device {dev['name']} gone from node-2's slice after detach",
    )
    assert gone["node-2"]["spec"]["pool"]["generation"] == generation + 2


def test_deny_list_hides_a_device_while_the_fabric_pool_offers_it(
    start_node_driver: Callable[..., NodeDriverProcess],
    slices_api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    objects: ObjectTracker,
) -> None:
    held, free = fabric_device(fabric_http, "fabric-0", 1), fabric_device(fabric_http, "fabric-0", 2)
    pool = objects.create(
        resource_slice(
            f"{slice_name(driver, 'fabric-0')}",
            driver,
            pool="fabric-0",
            all_nodes=True,
            devices=[device(held["name"], uuid_=held["uuid"])],
        )
    )
    start_node_driver("--republish", "--deny-list")
    attach(fabric_http, held, "node-0")
    attach(fabric_http, free, "node-0")
    # Both attaches completed before the poll that shows `free`; that same poll must have withheld `held`.
    seen = slices_until(
        slices_api,
        driver,
        lambda s: free["uuid"] in uuids(s.get("node-0")),
        f"{free['name']} (not in the fabric pool) in node-0's slice",
    )
    assert held["uuid"] not in uuids(seen["node-0"]), "the node driver advertised a device the fabric pool holds"

    slices_api.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", pool.metadata.name)
    slices_until(
        slices_api,
        driver,
        lambda s: held["uuid"] in uuids(s.get("node-0")),
        f"{held['name']} in node-0's slice once the fabric pool no longer offers it",
    )


def test_shutdown_removes_its_slices_and_stale_ones_are_cleaned(
    start_node_driver: Callable[..., NodeDriverProcess],
    slices_api: client.CustomObjectsApi,
    driver: str,
    objects: ObjectTracker,
) -> None:
    stale = resource_slice(slice_name(driver, "node-9"), driver, pool="node-9", node="node-9", devices=[device("x")])
    stale["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "fake-node-driver"}
    objects.create(stale)
    proc = start_node_driver()
    slices_until(slices_api, driver, lambda s: sorted(s) == NODES, f"slices of {NODES} only (node-9 removed)")
    assert proc.stop() == 0
    remaining = driver_slices(slices_api, driver)
    assert not remaining, f"slices left after shutdown: {sorted(remaining)}"


def test_only_nodes_that_exist_are_served_and_a_deleted_nodes_slice_is_removed(
    start_node_driver: Callable[..., NodeDriverProcess],
    slices_api: client.CustomObjectsApi,
    driver: str,
    cluster: Cluster,
    objects: ObjectTracker,
) -> None:
    late = f"late-{driver.split('.')[0]}"[:40]
    start_node_driver(nodes={**NODES_CONFIG["nodes"], late: {"local": [{"model": "fake-gpu", "count": 1}]}})
    slices_until(slices_api, driver, lambda s: sorted(s) == NODES, f"slices of {NODES} only ({late} is no node yet)")
    objects.create(fake_node(NodeSpec(late, {})))
    slices_until(slices_api, driver, lambda s: late in s, f"a slice of {late} once it joined")
    cluster.core.delete_node(late)
    slices_until(slices_api, driver, lambda s: sorted(s) == NODES, f"the slice of {late} removed with its node")
