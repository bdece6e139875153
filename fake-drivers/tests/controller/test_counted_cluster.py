"""Count-based fabric pools (--fabric-entries counted) on the real cluster: real kube-apiserver and scheduler, the
fabric manager, the node driver and the controller as processes (the controller with its ServiceAccount).

The fabric pool holds interchangeable entries per model without identity; the suite side cannot know which
physical device an attach will use, so faults are armed by node and the fault's record tells which device it hit.
Each test watches, for its whole length, that the entries offered free never exceed the fabric's free devices,
that no device is held by two live claims or offered through two node-local copies, and that no allocation is
rewritten in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import pod_with_claim_template
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from controller_harness import (
    ClaimHistory,
    ControllerProcess,
    CountedWatcher,
    InvariantWatcher,
    fabric_pool,
    pod_claim,
    results,
    taint_rules,
)
from fabric_harness import FabricProcess
from kubernetes import client
from nodedriver_harness import NodeDriverProcess
from test_controller_cluster import BIND_S, DETACH_S, attachments, bound_pod, wait_pools

COUNTED = ("--mode", "reschedule-to-local", "--fabric-entries", "counted", "--idle-grace", "2")


@dataclass(frozen=True)
class Stack:
    """The cluster, the fabric manager and the node driver (republishing) of one test; it starts the controller."""

    cluster: Cluster
    objects: ObjectTracker
    namespace: str
    api: client.CustomObjectsApi
    driver: str
    fabric_url: str
    http: httpx.Client
    fabric_names: dict[str, str]
    start_controller: Callable[..., ControllerProcess]


@pytest.fixture
def stack(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_proc: FabricProcess,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
    start_node_driver: Callable[..., NodeDriverProcess],
) -> Stack:
    start_node_driver("--republish")
    return Stack(cluster, objects, namespace, api, driver, fabric_proc.url, fabric_http, fabric_names, start_controller)


def pinned_pod(node: str) -> dict[str, Any]:
    pod = pod_with_claim_template("app", "gpu")
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def node_copy_uuid(api: client.CustomObjectsApi, driver: str, node: str, device: str) -> str:
    """The physical identity of a device in a node's pool (the node driver republishes with the fabric's uuid)."""
    slices = api.list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
    )["items"]
    for s in slices:
        if s["spec"].get("nodeName") == node:
            for d in s["spec"].get("devices") or []:
                if d["name"] == device:
                    return d["attributes"]["uuid"]["string"]
    raise AssertionError(f"{device} is not in the pool of {node}")


def free_count(http: httpx.Client, fabric: str) -> int:
    return next(f["free"] for f in http.get("/v1/attachments").json()["free"] if f["fabric"] == fabric)


def test_counted_pool_attaches_any_free_device_and_the_claim_moves_to_its_node_local_copy(stack: Stack) -> None:
    cluster, objects, namespace, api, driver = stack.cluster, stack.objects, stack.namespace, stack.api, stack.driver
    fabric_http, start_controller = stack.http, stack.start_controller
    start_controller(*COUNTED)
    wait_pools(api, driver)
    pool = fabric_pool(api, driver, "fabric-0")
    assert pool is not None
    entries = pool["spec"]["devices"]
    assert sorted(d["name"] for d in entries) == [f"fake-gpu-{i}" for i in range(4)], "one entry per free device"
    assert all("uuid" not in d["attributes"] and d["attributes"]["model"] == {"string": "fake-gpu"} for d in entries)
    assert entries[0]["bindingFailureConditions"] == [f"{driver}/attach-failed", f"{driver}/reschedule"]

    with (
        ClaimHistory(api, namespace) as history,
        InvariantWatcher(api, driver, stack.fabric_names) as invariants,
        CountedWatcher(api, driver, stack.fabric_url) as counted,
    ):
        objects.create(pinned_pod("node-2"), namespace)
        pod = bound_pod(cluster, namespace, "app")
        claim = pod_claim(api, cluster.core, namespace, "app")
        name = claim["metadata"]["name"]
        [final] = results(claim)
        assert (pod.spec.node_name, final["pool"], final.get("bindingConditions")) == ("node-2", "node-2", None)
        allocations = history.history[name]
        first = next(a for a in allocations if a)
        assert first[0][0] == "fabric-0" and first[0][1].startswith("fake-gpu-"), f"no count entry first: {allocations}"
        assert None in allocations[allocations.index(first) :], f"no deallocation in between: {allocations}"
        assert (f"{driver}/reschedule", "NodeLocalCopyPublished") in [c[:2] for c in history.conditions[name]]
        # The node-local copy is the device the fabric attached to the pod's node: the reschedule moved the claim
        # onto the same physical device, whichever one the controller picked.
        uuid = node_copy_uuid(api, driver, "node-2", final["device"])
        assert [(a["device"], a["node"]) for a in attachments(fabric_http)] == [(uuid, "node-2")]
        assert free_count(fabric_http, "fabric-0") == 3
        wait_for(
            lambda: fabric_pool(api, driver, "fabric-0"),
            lambda s: s is not None and len(s["spec"]["devices"]) == 3,
            timeout=DETACH_S,
            expected="the pool to list one entry per free device (3) once the count entry is deallocated",
            describe=lambda s: str(s and [d["name"] for d in s["spec"]["devices"]]),
        )
        cluster.core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
        wait_for(
            lambda: attachments(fabric_http),
            lambda a: not a,
            timeout=DETACH_S,
            expected="the device detached once its claim is gone",
        )
        wait_for(
            lambda: fabric_pool(api, driver, "fabric-0"),
            lambda s: s is not None and len(s["spec"]["devices"]) == 4,
            timeout=DETACH_S,
            expected="four entries again",
        )
    assert not history.in_place_rewrites(), history.in_place_rewrites()
    assert not invariants.violations, invariants.violations
    assert counted.observations and not counted.violations, counted.violations


def test_counted_attach_failure_on_a_node_fault_quarantines_the_device_it_hit(stack: Stack) -> None:
    cluster, objects, namespace, api, driver = stack.cluster, stack.objects, stack.namespace, stack.api, stack.driver
    fabric_http, start_controller = stack.http, stack.start_controller
    start_controller(*COUNTED, "--quarantine", "300")
    wait_pools(api, driver)
    body = {"mode": "fail", "node": "node-2", "reason": "FabricLinkDown", "message": "link 3 lost"}
    fault = fabric_http.post("/v1/faults", json=body).json()
    with (
        ClaimHistory(api, namespace) as history,
        InvariantWatcher(api, driver, stack.fabric_names) as invariants,
        CountedWatcher(api, driver, stack.fabric_url) as counted,
    ):
        objects.create(pinned_pod("node-2"), namespace)
        bound_pod(cluster, namespace, "app", timeout=2 * BIND_S)
        claim = pod_claim(api, cluster.core, namespace, "app")
    name = claim["metadata"]["name"]
    [hit] = fabric_http.get(f"/v1/faults/{fault['id']}").json()["hits"]
    assert hit["node"] == "node-2"
    failed = hit["device"]
    assert (f"{driver}/attach-failed", "FabricLinkDown") in [c[:2] for c in history.conditions[name]]
    [final] = results(claim)
    assert final["pool"] == "node-2"
    assert node_copy_uuid(api, driver, "node-2", final["device"]) != failed, "reallocated onto the failed device"
    assert fabric_http.get(f"/v1/devices/{failed}").json()["state"] == "free"
    rules = taint_rules(api, driver)
    quarantined = [r for r in rules if r["metadata"]["labels"]["fake-drivers.example.com/purpose"] == "quarantine"]
    assert [r["metadata"]["labels"]["fake-drivers.example.com/device-uuid"] for r in quarantined] == [failed]
    assert not history.in_place_rewrites(), history.in_place_rewrites()
    assert not invariants.violations, invariants.violations
    assert not counted.violations, counted.violations


def test_counted_controller_killed_mid_attach_goes_on_with_the_same_device(stack: Stack) -> None:
    cluster, objects, namespace, api, driver = stack.cluster, stack.objects, stack.namespace, stack.api, stack.driver
    fabric_http, start_controller = stack.http, stack.start_controller
    first = start_controller(*COUNTED)
    wait_pools(api, driver)
    fault = fabric_http.post("/v1/faults", json={"mode": "hang", "node": "node-2"}).json()
    with ClaimHistory(api, namespace) as history, CountedWatcher(api, driver, stack.fabric_url) as counted:
        objects.create(pinned_pod("node-2"), namespace)
        wait_for(
            lambda: fabric_http.get("/v1/faults").json()["hung"],
            bool,
            timeout=BIND_S,
            expected="the controller's attach to hang in the fabric",
            interval=0.05,
            max_interval=0.2,
        )
        # The device is in the claim (status.devices[].data.uuid) before its attach started.
        [entry] = pod_claim(api, cluster.core, namespace, "app")["status"]["devices"]
        # Restart at once: the scheduler's binding timeout (20 s in the test cluster) runs from the allocation.
        assert first.kill() == -9
        released = fabric_http.post("/v1/faults/release", json={"fault": fault["id"]}).json()["released"]
        start_controller(*COUNTED)
        [hit] = fabric_http.get(f"/v1/faults/{fault['id']}").json()["hits"]
        assert [r["device"] for r in released] == [hit["device"]]
        assert entry["data"] == {"uuid": hit["device"]}, entry
        bound_pod(cluster, namespace, "app")
        claim = pod_claim(api, cluster.core, namespace, "app")
    name = claim["metadata"]["name"]
    [final] = results(claim)
    assert final["pool"] == "node-2"
    attached = node_copy_uuid(api, driver, "node-2", final["device"])
    fabric_rounds = [a for a in history.history[name] if a and a[0][0] == "fabric-0"]
    if len(fabric_rounds) == 1:
        # The allocation outlived the restart: the restarted controller read the assignment back from the claim
        # (status.devices[].data.uuid) and went on with the device whose attach was in flight, not another one.
        assert attached == hit["device"], f"another device after restart: {attached}, hung attach {hit}"
    else:
        # On a loaded machine the restart can outlast the binding timeout: the scheduler reallocated, the new
        # allocation got a device of its own, and the first one must not stay attached for nobody.
        print(f"binding timeout during the restart ({len(fabric_rounds)} fabric allocations): {history.history[name]}")
    wait_for(
        lambda: attachments(fabric_http),
        lambda a: [(x["device"], x["node"]) for x in a] == [(attached, "node-2")],
        timeout=DETACH_S,
        expected=f"only the pod's device {attached} attached, to node-2",
    )
    assert not history.in_place_rewrites(), history.in_place_rewrites()
    assert not counted.violations, counted.violations
