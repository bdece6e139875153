"""Test nodes: create them (kwok plays their kubelet) and follow them until every one reports Ready."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client

from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.readiness import watch_until

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


# Put on every new Node by kube-apiserver (admission TaintNodesByCondition), taken off by kube-controller-manager's
# node lifecycle controller once the node is Ready: until then no test pod can land there.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _ready(node: client.V1Node) -> bool:
    """Ready, and the controller manager has taken the condition taints off (pods can be scheduled there)."""
    ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
    return ready and not any(t.key in CONDITION_TAINTS for t in (node.spec.taints or []))


def node_ready(node: dict[str, Any]) -> bool:
    """_ready for a node as plain JSON (a raw list)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not any(t.get("key") in CONDITION_TAINTS for t in (node.get("spec") or {}).get("taints") or [])


def wait_nodes_ready(
    core: client.CoreV1Api, names: list[str], timeout: float, stop: threading.Event | None = None
) -> None:
    """Follow the nodes by watch (no polling) until every one of `names` is Ready and schedulable."""
    wanted = set(names)

    def not_ready(nodes: dict[str, Any]) -> list[str]:
        return sorted(wanted - {name for name, node in nodes.items() if _ready(node)})

    watch_until(
        core.list_node,
        lambda nodes: not not_ready(nodes),
        timeout=timeout,
        expected=f"nodes {sorted(wanted)} to be Ready, without the {' and '.join(CONDITION_TAINTS)} taints",
        describe=lambda nodes: f"not Ready: {not_ready(nodes)}",
        stop=stop,
    )
