"""The harness against a real cluster (issue 27): manifests applied in order with a CRD Established before the custom
object that follows it; node hooks and perNode processes for the nodes there at the start and for a node that joins
during the run, stopped when it leaves; and pod-bound credentials whose user info carries the node (what a per-node
daemon's admission policy checks), read back through the API server's own SelfSubjectReview."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from conformance.cluster.client import Cluster
from conformance.cluster.nodes import fake_node, wait_nodes_ready
from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import wait_for
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import API_VERSION, KIND, load_profile

NS = "per-node-selftest"
SA = "node-daemon"
GROUP = "selftest.dra.example.com"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
ANNOTATION = "selftest.dra.example.com/node-hook"
# Who am I, as the API server sees this process's token: written to argv[1] as JSON with the token's claims.
WHOAMI = """
import base64, json, os, pathlib, sys, time, yaml
from kubernetes import client, config
api = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
review = client.AuthenticationV1Api(api).create_self_subject_review({"apiVersion": "authentication.k8s.io/v1",
    "kind": "SelfSubjectReview"})
token = yaml.safe_load(open(os.environ["KUBECONFIG"]))["users"][0]["user"]["token"]
payload = token.split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
info = review.status.user_info
pathlib.Path(sys.argv[1]).write_text(json.dumps({"user": info.username, "extra": info.extra or {},
    "claims": claims.get("kubernetes.io", {}), "node": sys.argv[2]}))
print("ready", flush=True)
time.sleep(600)
"""


def _manifests(path: Path) -> Path:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"machines.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Machine", "plural": "machines", "singular": "machine"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": NS}},
        crd,
        {"apiVersion": f"{GROUP}/v1", "kind": "Machine", "metadata": {"name": "m0", "namespace": NS}, "spec": {}},
    ]
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _annotate(node_placeholder: str) -> list[str]:
    code = (
        "import os, sys; from kubernetes import client, config; "
        "api = config.new_client_from_config(config_file=os.environ['KUBECONFIG']); "
        f"client.CoreV1Api(api).patch_node(sys.argv[1], {{'metadata': {{'annotations': {{'{ANNOTATION}': 'done'}}}}}})"
    )
    return [sys.executable, "-c", code, node_placeholder]


def _seen(path: Path) -> dict[str, Any]:
    return wait_for(
        lambda: json.loads(path.read_text()) if path.exists() else None,
        lambda v: v is not None,
        timeout=30,
        expected=f"{path} written by the per-node process",
    )


def _check_identity(seen: dict[str, Any], node: str) -> None:
    assert seen["user"] == f"system:serviceaccount:{NS}:{SA}", seen
    assert seen["extra"].get(NODE_NAME_EXTRA) == [node], f"the token's user info names no node {node}: {seen}"
    assert seen["claims"]["node"]["name"] == node and seen["claims"]["pod"]["name"], seen["claims"]


def test_per_node_processes_node_hooks_and_pod_bound_tokens(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "seen"
    out.mkdir()
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": "per-node",
        "version": "1",
        "driver": "gpu.example.com",
        "manifests": [str(_manifests(tmp_path / "manifests.yaml"))],
        "hooks": {"node": [{"name": "annotate", "command": _annotate("{node}")}]},
        "processes": [
            {
                "name": "daemon",
                "perNode": True,
                "command": [sys.executable, "-c", WHOAMI, f"{out}/{{node}}.json", "{node}"],
                "kubeconfig": "{pod_kubeconfig:" + NS + "/" + SA + "}",
                "ready": {"log": "ready", "timeoutSeconds": 60},
            }
        ],
    }
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    impl = Implementation(load_profile(path), cluster.info.kubeconfig, tmp_path / "work", progress=print)
    core = cluster.core
    nodes = [n.metadata.name for n in core.list_node().items]
    added = "per-node-selftest-joiner"
    impl.start()
    try:
        machine = cluster.kind(f"{GROUP}/v1", "Machine").get(name="m0", namespace=NS)
        assert machine.metadata.name == "m0", "the custom object after its CRD was applied"
        assert sorted(r.node or "" for r in impl.running) == sorted(nodes)
        for node in nodes:
            _check_identity(_seen(out / f"{node}.json"), node)
            assert core.read_node(node).metadata.annotations.get(ANNOTATION) == "done"

        core.create_node(fake_node(NodeSpec(name=added, labels={})))  # a node joins during the run
        wait_nodes_ready(core, [added], timeout=60)
        _check_identity(_seen(out / f"{added}.json"), added)
        assert core.read_node(added).metadata.annotations.get(ANNOTATION) == "done", "node hook for the joiner"

        instance = next(r for r in impl.running if r.node == added)
        core.delete_node(added)  # and leaves: its instance stops, its holder pod goes
        wait_for(lambda: instance.proc.poll(), lambda c: c is not None, timeout=60, expected=f"daemon@{added} stopped")
        assert added not in {r.node for r in impl.running}
        holders = core.list_namespaced_pod(NS).items
        wait_for(
            lambda: [p.spec.node_name for p in core.list_namespaced_pod(NS).items],
            lambda on: added not in on,
            timeout=30,
            expected=f"the holder pod on {added} deleted",
        )
        assert len(holders) >= len(nodes)
    finally:
        problems = impl.stop()
        if added in {n.metadata.name for n in core.list_node().items}:
            core.delete_node(added)
    assert problems == []
    wait_for(
        lambda: [p.metadata.name for p in core.list_namespaced_pod(NS).items] if _exists(core) else [],
        lambda left: not left,
        timeout=60,
        expected=f"no holder pod left in {NS}",
    )


def _exists(core: Any) -> bool:
    return any(n.metadata.name == NS for n in core.list_namespace().items)


REPO = Path(__file__).resolve().parents[2]


def _slice(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"selftest-{node}"},
        "spec": {"driver": "gpu.fabric.example.com", "nodeName": node, "pool": {"name": node, "resourceSliceCount": 1}},
    }


def test_the_node_driver_policy_lets_a_pod_bound_token_write_only_its_nodes_slices(
    cluster: Cluster, tmp_path: Path
) -> None:
    """fake-drivers/deploy/node-driver-rbac.yaml (reference-pernode.yaml): RBAC allows any slice; the admission
    policy narrows it to the node of the pod the token is bound to, and refuses a token bound to no pod."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": "policy",
        "version": "1",
        "driver": "gpu.fabric.example.com",
        "manifests": [
            str(REPO / "fixtures/profiles/reference/namespace.yaml"),
            str(REPO / "fake-drivers/deploy/node-driver-rbac.yaml"),
        ],
    }
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    impl = Implementation(load_profile(path), cluster.info.kubeconfig, tmp_path / "work", progress=print)
    impl.start()
    try:
        nodes = sorted(n.metadata.name for n in cluster.core.list_node().items)
        mine, other = nodes[0], nodes[1]
        bound = impl.resolve(f"{{pod_kubeconfig:dra-fabric-system/reference-node-driver@{mine}}}")
        plain = impl.resolve("{sa_kubeconfig:dra-fabric-system/reference-node-driver}")

        def create(kubeconfig: str, node: str) -> str:
            api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
            body = _slice(node)

            def attempt() -> str:  # the policy's binding takes a moment to be enforced after it is created
                try:
                    api.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", body)
                except ApiException as exc:
                    return f"{exc.status}: {exc.body}"
                cluster.resource.delete_resource_slice(body["metadata"]["name"])
                return "created"

            return attempt()

        refused = wait_for(
            lambda: create(bound, other),
            lambda said: said != "created",
            timeout=30,
            expected=f"the policy to refuse a slice of {other} from a token bound to a pod on {mine}",
        )
        assert "may write only the slices of the node its token is bound to" in refused, refused
        assert create(bound, mine) == "created"
        assert "may write only" in create(plain, mine), "a token bound to no pod writes no slice"
    finally:
        assert impl.stop() == []
