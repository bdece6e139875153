"""The harness starts the reference stack from its profile, the stack works, and stopping it leaves nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import claim_template, device_class, pod_with_claim_template, unique_driver
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import LoadedProfile


def node_slices(api: client.CustomObjectsApi, driver: str) -> dict[str, list[str]]:
    items = api.list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
    )["items"]
    return {
        i["spec"]["nodeName"]: [d["name"] for d in i["spec"].get("devices", [])]
        for i in items
        if i["spec"].get("nodeName")
    }


def fabric_pools(api: client.CustomObjectsApi, driver: str) -> dict[str, list[str]]:
    items = api.list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
    )["items"]
    return {
        i["spec"]["pool"]["name"]: [d["name"] for d in i["spec"].get("devices", [])]
        for i in items
        if not i["spec"].get("nodeName")
    }


def test_reference_profile_starts_works_and_stops(
    cluster: Cluster, profile: LoadedProfile, tmp_path: Path, objects: ObjectTracker, namespace: str
) -> None:
    driver = profile.profile.driver
    api = client.CustomObjectsApi(cluster.api)
    impl = Implementation(profile, cluster.info.kubeconfig, tmp_path)
    impl.start()
    try:
        probe = impl.resolve(profile.profile.fabric_probe.url)
        assert json.load(urllib.request.urlopen(probe, timeout=5))["attachments"] == []
        slices = wait_for(
            lambda: node_slices(api, driver),
            lambda s: len(s) == len(cluster.info.nodes),
            timeout=10,
            expected=f"a slice of {driver} for each of the {len(cluster.info.nodes)} nodes",
        )
        assert slices["node-0"] == ["local-fake-gpu-0"] and slices["node-2"] == []
        wait_for(
            lambda: fabric_pools(api, driver),
            lambda p: sorted(p) == ["fabric-0", "fabric-1"],
            timeout=10,
            expected="the controller's fabric pools fabric-0 and fabric-1",
        )

        # A pod pinned to node-2 (no local device) needs a fabric device: attached, then bound there.
        objects.create(device_class(unique_driver("cls"), driver))
        cls = objects.created[-1][2]
        objects.create(claim_template("gpu", cls), namespace)
        pod = pod_with_claim_template("app", "gpu")
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-2"}
        objects.create(pod, namespace)
        wait_for(
            lambda: cluster.core.read_namespaced_pod("app", namespace),
            lambda p: p.status.phase == "Running",
            timeout=60,
            expected="the pod on node-2 Running with an attached fabric device",
            describe=lambda p: f"phase={p.status.phase} node={p.spec.node_name}",
        )
        attached = json.load(urllib.request.urlopen(probe, timeout=5))["attachments"]
        assert [(a["node"], a["state"]) for a in attached] == [("node-2", "attached")], attached
    finally:
        problems = impl.stop()
    assert not problems, problems
    assert node_slices(api, driver) == {}, "the node driver left slices behind"


def test_cached_kubectl_of_the_cluster_version_is_first_on_path(cluster: Cluster) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl and "dra-conformance" in kubectl, f"kubectl on PATH is {kubectl}"
    out = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True, check=True).stdout
    assert f"v{cluster.info.version}" in out
