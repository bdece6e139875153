"""The harness starts the reference stack from its profile, the stack works, and stopping it leaves nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

from kubernetes import client

from conformance.cluster import Cluster
from conformance.implementation import Implementation
from conformance.profile import LoadedProfile
from conformance.waits import wait_for


def node_slices(api: client.CustomObjectsApi, driver: str) -> dict[str, list[str]]:
    items = api.list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.driver={driver}"
    )["items"]
    return {
        i["spec"]["nodeName"]: [d["name"] for d in i["spec"].get("devices", [])]
        for i in items
        if i["spec"].get("nodeName")
    }


def test_reference_profile_starts_works_and_stops(cluster: Cluster, profile: LoadedProfile, tmp_path: Path) -> None:
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

        fabric = impl.url("fabric-manager")
        devices = json.load(urllib.request.urlopen(f"{fabric}/v1/devices?fabric=fabric-0", timeout=5))["devices"]
        request = urllib.request.Request(
            f"{fabric}/v1/devices/{devices[0]['uuid']}/attach",
            method="POST",
            data=b'{"node": "node-2"}',
            headers={"Content-Type": "application/json"},
        )
        assert urllib.request.urlopen(request, timeout=10).status == 200
        wait_for(
            lambda: node_slices(api, driver),
            lambda s: devices[0]["name"] in s["node-2"],
            timeout=5,
            expected=f"{devices[0]['name']} hot-plugged into node-2's slice",
        )
    finally:
        problems = impl.stop()
    assert not problems, problems
    assert node_slices(api, driver) == {}, "the node driver left slices behind"


def test_cached_kubectl_of_the_cluster_version_is_first_on_path(cluster: Cluster) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl and "dra-conformance" in kubectl, f"kubectl on PATH is {kubectl}"
    out = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True, check=True).stdout
    assert f"v{cluster.info.version}" in out
