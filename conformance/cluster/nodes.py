"""Test nodes: create them (kwok plays their kubelet) and wait until every one reports Ready."""

from __future__ import annotations

from kubernetes import client

from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import wait_for

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def fake_node(spec: NodeSpec) -> dict:
    """A Node object as kwok expects it: a fake kubelet with room for many pods."""
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "1100"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": {"kubernetes.io/hostname": spec.name, "kubernetes.io/os": "linux", "type": "kwok", **spec.labels},
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
        # kwok nodes run no real containers; the taint-free spec lets every test pod land.
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def create_nodes(core: client.CoreV1Api, nodes: list[NodeSpec]) -> None:
    for spec in nodes:
        core.create_node(fake_node(spec))


def _ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def wait_nodes_ready(core: client.CoreV1Api, names: list[str], timeout: float) -> None:
    wanted = set(names)

    def not_ready(nodes: list[client.V1Node]) -> list[str]:
        ready = {n.metadata.name for n in nodes if _ready(n)}
        return sorted(wanted - ready)

    wait_for(
        lambda: core.list_node().items,
        lambda nodes: not not_ready(nodes),
        timeout=timeout,
        expected=f"nodes {sorted(wanted)} to be Ready",
        describe=lambda nodes: f"not Ready: {not_ready(nodes or [])}",
    )
