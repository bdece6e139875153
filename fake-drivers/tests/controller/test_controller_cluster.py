"""The reference controller against a real cluster: real kube-apiserver, kube-scheduler and controller-manager,
the real fabric manager and the controller as processes, the controller with its own ServiceAccount's token.

Each test names the behaviour it checks; each watches the invariants (no physical device offered free twice,
no device held by two live claims) for its whole length, not only at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import pod_with_claim_template
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from controller_harness import (
    ClaimHistory,
    ControllerProcess,
    InvariantWatcher,
    device_conditions,
    fabric_pool,
    pod_claim,
    results,
    taint_rules,
)
from kubernetes import client
from nodedriver_harness import NodeDriverProcess

BIND_S = 60.0  # attach + the scheduler's 5 s PreBind poll, on a loaded 2-core machine
DETACH_S = 30.0


def fabric_device(http: httpx.Client, uuid: str) -> dict[str, Any]:
    return http.get(f"/v1/devices/{uuid}").json()


def attachments(http: httpx.Client) -> list[dict[str, Any]]:
    return http.get("/v1/attachments").json()["attachments"]


def bound_pod(cluster: Cluster, namespace: str, name: str, timeout: float = BIND_S) -> client.V1Pod:
    return wait_for(
        lambda: cluster.core.read_namespaced_pod(name, namespace),
        lambda p: bool(p.spec.node_name),
        timeout=timeout,
        expected=f"pod {namespace}/{name} to be bound",
        describe=lambda p: (
            f"node={p.spec.node_name} nominated={p.status.nominated_node_name} "
            f"conditions={[(c.type, c.status, c.reason, c.message) for c in p.status.conditions or []]}"
        ),
    )


def allocated_claim(
    api: client.CustomObjectsApi, cluster: Cluster, namespace: str, pod: str, pool: str | None = None
) -> dict[str, Any]:
    return wait_for(
        lambda: pod_claim(api, cluster.core, namespace, pod),
        lambda c: bool(results(c)) and (pool is None or results(c)[0]["pool"].startswith(pool)),
        timeout=BIND_S,
        expected=f"the claim of {namespace}/{pod} to be allocated" + (f" from pool {pool}*" if pool else ""),
        describe=lambda c: str((c.get("status") or {}).get("allocation")),
        transient=(Exception,),
    )


def wait_pools(api: client.CustomObjectsApi, driver: str, fabrics: tuple[str, ...] = ("fabric-0", "fabric-1")) -> None:
    wait_for(
        lambda: [fabric_pool(api, driver, f) for f in fabrics],
        all,
        timeout=30,
        expected=f"the controller to publish the fabric pools {fabrics}",
    )


def fabric_uuid(api: client.CustomObjectsApi, driver: str, pool: str, device: str) -> str:
    slice_ = fabric_pool(api, driver, pool)
    assert slice_ is not None
    [entry] = [d for d in slice_["spec"]["devices"] if d["name"] == device]
    return entry["attributes"]["uuid"]["string"]


# --- IMP-1, IMP-2, IMP-3, SCH-3, SCH-4 ----------------------------------------------------------------------


def test_pod_is_not_bound_until_its_device_is_attached_then_binds_to_that_node(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
    start_node_driver: Callable[..., NodeDriverProcess],
) -> None:
    # keep-in-pool with the node driver's deny list: the hot-plugged copy must never be offered as well.
    start_node_driver("--republish", "--deny-list")
    controller = start_controller("--mode", "keep-in-pool")
    wait_pools(api, driver)
    pool = fabric_pool(api, driver, "fabric-0")
    assert pool is not None
    spec = pool["spec"]
    assert spec["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["fabric-0"]
    assert len(spec["devices"]) == 4 and all(d["bindsToNode"] for d in spec["devices"])
    assert spec["devices"][0]["bindingConditions"] == [f"{driver}/attached"]
    assert spec["devices"][0]["bindingFailureConditions"] == [f"{driver}/attach-failed", f"{driver}/reschedule"]

    fabric_http.post("/v1/faults", json={"mode": "slow", "delaySeconds": 3}).raise_for_status()  # a window to look
    with InvariantWatcher(api, driver, fabric_names) as invariants:
        objects.create(pod_with_claim_template("app", "gpu"), namespace)
        claim = allocated_claim(api, cluster, namespace, "app")
        [result] = results(claim)
        node = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        uuid = fabric_names[result["device"]]
        assert result["bindingConditions"] == [f"{driver}/attached"], "the result carries the slice's conditions"

        # While the fabric is attaching, the pod must stay unbound and the condition unset.
        seen_attaching = 0
        while fabric_device(fabric_http, uuid)["state"] != "attached":
            pod = cluster.core.read_namespaced_pod("app", namespace)
            assert not pod.spec.node_name, f"pod bound to {pod.spec.node_name} before the attach completed"
            current = pod_claim(api, cluster.core, namespace, "app")
            assert f"{driver}/attached" not in device_conditions(current, result), "condition set before attach"
            seen_attaching += 1
            assert seen_attaching < 400, "attach did not complete"
            time.sleep(0.05)
        assert seen_attaching > 0, "never saw the attach in progress"

        pod = bound_pod(cluster, namespace, "app")
        assert pod.spec.node_name == node, f"allocated on {node}, bound to {pod.spec.node_name}"
        device = fabric_device(fabric_http, uuid)
        assert (device["state"], device["node"]) == ("attached", node), "bound, but the fabric disagrees"
        current = pod_claim(api, cluster.core, namespace, "app")
        condition = device_conditions(current, result)[f"{driver}/attached"]
        assert condition["status"] == "True" and condition["reason"] == "Attached" and condition["lastTransitionTime"]
        generation = current["metadata"].get("generation", 0)
        assert condition.get("observedGeneration", 0) == generation, (condition, generation)
        events = cluster.core.list_namespaced_event(namespace, field_selector="involvedObject.name=app").items
        assert "BindingConditionsPending" in {e.reason for e in events}
        # The node driver runs, and with the deny list it did not republish the attached device.
        node_slice = wait_for(
            lambda: [
                s
                for s in api.list_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
                )["items"]
                if s["spec"].get("nodeName") == node
            ],
            bool,
            timeout=10,
            expected=f"the node driver's slice of {node}",
        )
        assert result["device"] not in [d["name"] for d in node_slice[0]["spec"].get("devices") or []]
    assert invariants.observations > 20
    assert not invariants.violations, invariants.violations
    metrics = controller.metrics()
    assert 'reference_controller_attach_seconds_count{outcome="success"} 1.0' in metrics, metrics


# --- IMP-5 ---------------------------------------------------------------------------------------------------


def test_deleting_the_pod_detaches_the_device_and_offers_it_again(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
) -> None:
    controller = start_controller("--idle-grace", "1")
    wait_pools(api, driver)
    with InvariantWatcher(api, driver, fabric_names) as invariants:
        objects.create(pod_with_claim_template("app", "gpu"), namespace)
        pod = bound_pod(cluster, namespace, "app")
        [result] = results(pod_claim(api, cluster.core, namespace, "app"))
        uuid = fabric_names[result["device"]]
        assert fabric_device(fabric_http, uuid)["node"] == pod.spec.node_name

        cluster.core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
        wait_for(
            lambda: fabric_device(fabric_http, uuid),
            lambda d: d["state"] == "free",
            timeout=DETACH_S,
            expected=f"device {uuid} detached after its pod was deleted",
        )
        wait_for(
            lambda: taint_rules(api, driver),
            lambda rules: not rules,
            timeout=DETACH_S,
            expected="the detach guard to be removed once the device is free",
            describe=lambda rules: str([r["metadata"]["name"] for r in rules]),
        )
        pool = fabric_pool(api, driver, result["pool"])
        assert pool is not None and result["device"] in [d["name"] for d in pool["spec"]["devices"]]
    assert attachments(fabric_http) == []
    assert not invariants.violations, invariants.violations
    assert 'reference_controller_detach_seconds_count{outcome="success"} 1.0' in controller.metrics()


# --- IMP-4, SCH-5 --------------------------------------------------------------------------------------------


def test_failed_attach_reports_the_fabric_reason_quarantines_the_device_and_reschedules_onto_another(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
) -> None:
    start_controller("--quarantine", "300")
    wait_pools(api, driver)
    fault = {"mode": "fail", "reason": "FabricLinkDown", "message": "link 3 lost"}
    fabric_http.post("/v1/faults", json=fault).raise_for_status()
    # Pinned to one node, so the reallocation has to choose within the same fabric pool again: first fit would
    # pick the failed device again unless it is kept out.
    pod_manifest = pod_with_claim_template("app", "gpu")
    pod_manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-0"}
    with ClaimHistory(api, namespace) as history, InvariantWatcher(api, driver, fabric_names) as invariants:
        objects.create(pod_manifest, namespace)
        pod = bound_pod(cluster, namespace, "app")
        claim = pod_claim(api, cluster.core, namespace, "app")
    name = claim["metadata"]["name"]
    allocations = [a for a in history.history[name] if a]
    _, failed_device, _ = allocations[0][0]
    assert (f"{driver}/attach-failed", "FabricLinkDown") in [c[:2] for c in history.conditions[name]], (
        f"no attach-failed with the fabric's reason: {history.conditions[name]}"
    )
    assert any("link 3 lost" in c[2] for c in history.conditions[name])
    [final] = results(claim)
    assert final["device"] != failed_device, f"reallocated onto the device whose attach failed: {allocations}"
    assert failed_device not in [a[0][1] for a in allocations[1:]], f"failed device offered again: {allocations}"
    assert fabric_device(fabric_http, fabric_names[final["device"]])["node"] == pod.spec.node_name
    assert fabric_device(fabric_http, fabric_names[failed_device])["state"] == "free"
    rules = taint_rules(api, driver)
    quarantined = [r for r in rules if r["metadata"]["labels"]["fake-drivers.example.com/purpose"] == "quarantine"]
    assert [r["spec"]["deviceSelector"]["device"] for r in quarantined] == [failed_device]
    assert quarantined[0]["spec"]["taint"]["effect"] == "NoSchedule"
    assert not history.in_place_rewrites(), history.in_place_rewrites()
    assert not invariants.violations, invariants.violations


# --- IMP-8 ---------------------------------------------------------------------------------------------------


def test_controller_killed_mid_attach_and_restarted_loses_nothing(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
) -> None:
    first = start_controller("--idle-grace", "2")
    wait_pools(api, driver)
    fabric_http.post("/v1/faults", json={"mode": "hang"}).raise_for_status()
    with ClaimHistory(api, namespace) as history, InvariantWatcher(api, driver, fabric_names) as invariants:
        objects.create(pod_with_claim_template("app", "gpu"), namespace)
        hung = wait_for(
            lambda: fabric_http.get("/v1/faults").json()["hung"],
            bool,
            timeout=BIND_S,
            expected="the controller's attach to hang in the fabric",
        )
        assert first.kill() == -9
        released = fabric_http.post("/v1/faults/release", json={}).json()["released"]
        assert [h["device"] for h in released] == [hung[0]["device"]]
        start_controller("--idle-grace", "2")

        pod = bound_pod(cluster, namespace, "app")
        claim = pod_claim(api, cluster.core, namespace, "app")
        [result] = results(claim)
        uuid = fabric_names[result["device"]]
        # The attach in flight at the kill is not lost: the restarted controller finds it completed and reports
        # it, well within the binding timeout, so the pod binds with the allocation it had (no reallocation).
        assert uuid == hung[0]["device"], f"bound with {result['device']}, the hung attach was {hung[0]}"
        allocations = history.history[claim["metadata"]["name"]]
        assert [a for a in allocations if a] == [allocations[-1]] and None not in allocations[1:], allocations
        # And the end state is that of an uninterrupted run: the pod's device attached to its node, nothing else.
        wait_for(
            lambda: attachments(fabric_http),
            lambda a: [(x["device"], x["node"]) for x in a] == [(uuid, pod.spec.node_name)],
            timeout=DETACH_S,
            expected="only the pod's device attached, to its node",
        )
        condition = device_conditions(pod_claim(api, cluster.core, namespace, "app"), result)
        assert condition[f"{driver}/attached"]["status"] == "True"
    assert not invariants.violations, invariants.violations


# --- IMP-7 (reschedule-to-local), IMP-6 ---------------------------------------------------------------------


def test_reschedule_to_local_moves_the_claim_to_the_node_local_copy_by_reallocation(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
    start_node_driver: Callable[..., NodeDriverProcess],
) -> None:
    start_node_driver("--republish")
    start_controller("--mode", "reschedule-to-local", "--idle-grace", "2")
    wait_pools(api, driver)
    # Pinned to one node: the scheduler has no scoring that brings a rescheduled claim back to the node of the
    # node-local copy, so only a pinned pod makes "same node, same device" a property to assert.
    pod_manifest = pod_with_claim_template("app", "gpu")
    pod_manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-2"}
    with ClaimHistory(api, namespace) as history, InvariantWatcher(api, driver, fabric_names) as invariants:
        objects.create(pod_manifest, namespace)
        pod = bound_pod(cluster, namespace, "app")
        claim = pod_claim(api, cluster.core, namespace, "app")
        name = claim["metadata"]["name"]
        [final] = results(claim)
        assert pod.spec.node_name == "node-2"
        assert (final["pool"], final.get("bindingConditions")) == ("node-2", None), f"not node-local: {final}"
        allocations = history.history[name]
        first = next(a for a in allocations if a)
        assert first[0][0] == "fabric-0", f"first allocation should be the fabric copy: {allocations}"
        assert final["device"] == first[0][1], "the node-local copy is another physical device"
        uuid = fabric_names[final["device"]]
        assert fabric_device(fabric_http, uuid)["node"] == "node-2"
        assert (f"{driver}/reschedule", "NodeLocalCopyPublished") in [c[:2] for c in history.conditions[name]]
        assert None in allocations[allocations.index(first) :], f"no deallocation in between: {allocations}"
        assert not history.in_place_rewrites(), history.in_place_rewrites()
        assert [a["device"] for a in attachments(fabric_http)] == [uuid]

        cluster.core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
        wait_for(
            lambda: attachments(fabric_http),
            lambda a: not a,
            timeout=DETACH_S,
            expected="the node-local copy's device detached once its claim is gone",
        )
        wait_for(
            lambda: fabric_pool(api, driver, "fabric-0"),
            lambda s: s is not None and len(s["spec"]["devices"]) == 4,
            timeout=DETACH_S,
            expected="the device back in the fabric pool",
        )
    assert not invariants.violations, invariants.violations


def test_reschedule_to_local_unpinned_pods_end_bound_with_no_device_held_twice_or_left_attached(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
    start_node_driver: Callable[..., NodeDriverProcess],
) -> None:
    start_node_driver("--republish")
    start_controller("--mode", "reschedule-to-local", "--idle-grace", "2", "--max-reschedules", "1")
    wait_pools(api, driver)
    pods = ["a", "b", "c"]
    with ClaimHistory(api, namespace) as history, InvariantWatcher(api, driver, fabric_names) as invariants:
        for name in pods:
            objects.create(pod_with_claim_template(name, "gpu"), namespace)
        bound = {name: bound_pod(cluster, namespace, name, timeout=2 * BIND_S).spec.node_name for name in pods}
        held = {}
        for name in pods:
            [result] = results(pod_claim(api, cluster.core, namespace, name))
            held[fabric_names[result["device"]]] = bound[name]
        # Devices attached for a round that ended elsewhere are detached: only the pods' devices stay.
        wait_for(
            lambda: attachments(fabric_http),
            lambda a: {x["device"]: x["node"] for x in a} == held,
            timeout=DETACH_S,
            expected=f"exactly the pods' devices attached to their nodes: {held}",
        )
    assert not history.in_place_rewrites(), history.in_place_rewrites()
    assert not invariants.violations, invariants.violations
    rounds = {n: sum(1 for a in seen if a and a[0][0].startswith("fabric-")) for n, seen in history.history.items()}
    assert all(r <= 2 for r in rounds.values()), f"more than max-reschedules + 1 fabric rounds: {rounds}"


def test_a_claim_keeping_its_fabric_copy_keeps_the_hot_plugged_copy_from_anyone_else(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
    start_node_driver: Callable[..., NodeDriverProcess],
) -> None:
    # reschedule-to-local with no reschedule left: the claim keeps the fabric copy while the node driver
    # republishes the device on its node. The "hold" taint must keep that copy from a second pod on the node,
    # which would otherwise get it first (node-local pools are preferred).
    start_node_driver("--republish")
    start_controller("--mode", "reschedule-to-local", "--max-reschedules", "0")
    wait_pools(api, driver)

    def pinned(name: str) -> dict[str, Any]:
        manifest = pod_with_claim_template(name, "gpu")
        manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-0"}
        return manifest

    with InvariantWatcher(api, driver, fabric_names) as invariants:
        objects.create(pinned("first"), namespace)
        bound_pod(cluster, namespace, "first")
        [held] = results(pod_claim(api, cluster.core, namespace, "first"))
        assert held["pool"] == "fabric-0", held
        wait_for(
            lambda: [
                d["name"]
                for s in api.list_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
                )["items"]
                if s["spec"].get("nodeName") == "node-0"
                for d in s["spec"].get("devices") or []
            ],
            lambda names: held["device"] in names,
            timeout=10,
            expected=f"the node driver to republish {held['device']} on node-0",
        )
        objects.create(pinned("second"), namespace)
        bound_pod(cluster, namespace, "second")
        [second] = results(pod_claim(api, cluster.core, namespace, "second"))
        assert second["device"] != held["device"], f"the second pod got the first pod's device: {second}"
        rules = [r for r in taint_rules(api, driver) if r["spec"]["deviceSelector"]["device"] == held["device"]]
    assert not invariants.violations, invariants.violations
    assert [r["metadata"]["labels"]["fake-drivers.example.com/purpose"] for r in rules] == ["hold"]
