"""A pod asking for a node-local device (no binding conditions) is allocated, bound and Running.

This is the baseline every binding-condition scenario builds on: the real scheduler's DynamicResources plugin
allocates from a ResourceSlice, the resourceclaim controller creates the claim from its template, kwok runs
the pod. On nodes with a real kubelet (kind) the test's own driver has no kubelet plugin, so the kubelet cannot
prepare the claim and the container never starts: there the pod must be bound to the device's node, and a
container actually started with its CDI device is NODE-1's, with the implementation's driver and kubelet plugin.
"""

from __future__ import annotations

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import (
    claim_template,
    device,
    device_class,
    pod_with_claim_template,
    resource_slice,
    unique_driver,
)
from conformance.cluster.nodes import KWOK_NODE_ANNOTATION
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for

SCHEDULE_TIMEOUT_S = 60.0


@pytest.mark.requirement("BASE-1")
def test_pod_with_node_local_device_is_allocated_bound_and_running(
    cluster: Cluster, objects: ObjectTracker, namespace: str
) -> None:
    node = cluster.info.nodes[0].name
    annotations = cluster.core.read_node(node).metadata.annotations or {}
    kubelet = KWOK_NODE_ANNOTATION not in annotations  # a real kubelet: bound is as far as a driver-less claim gets
    driver = unique_driver("local")
    objects.create(device_class(driver, driver))
    objects.create(resource_slice(f"{driver}-{node}", driver, pool=node, node=node, devices=[device("gpu-0")]))
    objects.create(claim_template("gpu", driver), namespace)
    objects.create(pod_with_claim_template("app", "gpu"), namespace)

    pod = wait_for(
        lambda: cluster.core.read_namespaced_pod("app", namespace),
        (lambda p: bool(p.spec.node_name)) if kubelet else (lambda p: p.status.phase == "Running"),
        timeout=SCHEDULE_TIMEOUT_S,
        expected=f"pod {namespace}/app to be {'bound to' if kubelet else 'Running on'} {node}",
        describe=lambda p: f"phase={p.status.phase} node={p.spec.node_name} conditions={p.status.conditions}",
    )
    assert pod.spec.node_name == node, f"the only device is on {node}, pod went to {pod.spec.node_name}"

    claim_name = pod.status.resource_claim_statuses[0].resource_claim_name
    claim = cluster.kind("resource.k8s.io/v1", "ResourceClaim").get(name=claim_name, namespace=namespace).to_dict()
    allocation = claim["status"]["allocation"]
    results = allocation["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(driver, node, "gpu-0")]
    assert not results[0].get("bindingConditions"), "a device without binding conditions got some in its result"
    reserved = [ref["name"] for ref in claim["status"].get("reservedFor", [])]
    assert reserved == ["app"], f"claim should be reserved for the pod, reservedFor={reserved}"
