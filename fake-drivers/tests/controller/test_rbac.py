"""IMP-9: deploy/rbac.yaml is enough for the controller's status writes on its own driver's claims, and the real
apiserver refuses them for another driver's claim and without the resourceclaims/driver rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import unique_driver
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from conformance.implementation.serviceaccount import service_account_kubeconfig
from controller_harness import api_client, rbac_manifests, unique_name
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fake_drivers.controller.decide import ConditionWrite
from fake_drivers.controller.kube import Kube
from fake_drivers.controller.model import Claim
from fake_drivers.controller.settings import Settings

G, V = "resource.k8s.io", "v1"


def allocated_claim(cluster: Cluster, objects: ObjectTracker, namespace: str, driver: str) -> Claim:
    """A claim allocated (by the admin, standing in for the scheduler) to a fabric device of `driver`."""
    name = unique_name("claim")
    objects.create(
        {
            "apiVersion": f"{G}/{V}",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": driver}}]}},
        },
        namespace,
    )
    api = client.CustomObjectsApi(cluster.api)
    body = api.get_namespaced_custom_object(G, V, namespace, "resourceclaims", name)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}
    body["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "dev",
                        "driver": driver,
                        "pool": "fabric-0",
                        "device": "fabric-0-fake-gpu-0",
                        "bindingConditions": [f"{driver}/attached"],
                        "bindingFailureConditions": [f"{driver}/attach-failed", f"{driver}/reschedule"],
                    }
                ]
            },
            "nodeSelector": {"nodeSelectorTerms": [term]},
        }
    }
    stored = api.replace_namespaced_custom_object_status(G, V, namespace, "resourceclaims", name, body)
    return Claim.from_api(stored)


def write(settings: Settings, claim: Claim) -> ConditionWrite:
    [result] = claim.results
    return ConditionWrite(claim, result, settings.attached, "Attached", "attached by the test")


def sa_kube(
    cluster: Cluster, objects: ObjectTracker, namespace: str, driver: str, tmp_path: Path, **options: Any
) -> Kube:
    name = unique_name("reference-controller")
    for manifest in rbac_manifests(driver, namespace, name, **options):
        objects.create(manifest)
    kubeconfig = service_account_kubeconfig(
        cluster.info.kubeconfig, cluster.core, namespace, name, tmp_path / f"{name}.kubeconfig"
    )
    return Kube(api_client(kubeconfig), Settings(driver=driver))


def settled(kube: Kube, action: Any) -> Any:
    """RBAC changes reach the authorizer's cache within about a second: retry a plain 403 for a while."""

    def attempt() -> Any:
        try:
            return action()
        except ApiException as exc:
            if exc.status == 403:
                raise
            return exc

    return wait_for(attempt, lambda _: True, timeout=15, expected="RBAC of the new ServiceAccount to take effect")


def test_the_shipped_role_writes_its_own_driver_and_is_refused_on_another(
    cluster: Cluster, objects: ObjectTracker, namespace: str, tmp_path: Path
) -> None:
    driver, other = unique_driver("rbac"), unique_driver("other")
    kube = sa_kube(cluster, objects, namespace, driver, tmp_path)
    own, foreign = (allocated_claim(cluster, objects, namespace, d) for d in (driver, other))

    assert settled(kube, lambda: kube.write_condition(write(kube.settings, own), 0)) == "written"
    assert settled(kube, kube.list_claims), "list of claims refused"

    refused = settled(kube, lambda: kube.write_condition(write(Settings(driver=other), foreign), 0))
    assert isinstance(refused, ApiException), f"write on another driver's claim was allowed: {refused}"
    assert refused.status == 422, refused
    assert "resourceclaims/driver" in str(refused.body) and "arbitrary-node:update" in str(refused.body)


def test_without_the_resourceclaims_driver_rule_the_status_write_is_refused(
    cluster: Cluster, objects: ObjectTracker, namespace: str, tmp_path: Path
) -> None:
    driver = unique_driver("rbac")
    kube = sa_kube(cluster, objects, namespace, driver, tmp_path, drop_driver_rule=True)
    own = allocated_claim(cluster, objects, namespace, driver)
    refused = settled(kube, lambda: kube.write_condition(write(kube.settings, own), 0))
    assert isinstance(refused, ApiException) and refused.status == 422, refused
    assert "is forbidden" in str(refused.body)


@pytest.mark.parametrize("verb", ["create", "delete"])
def test_the_role_cannot_touch_pods_or_nodes(
    cluster: Cluster, objects: ObjectTracker, namespace: str, tmp_path: Path, verb: str
) -> None:
    driver = unique_driver("rbac")
    kube = sa_kube(cluster, objects, namespace, driver, tmp_path)
    core = client.CoreV1Api(kube.api.api_client)
    action = {
        "create": lambda: core.create_namespaced_pod(
            namespace, {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        ),
        "delete": lambda: core.delete_node("node-0"),
    }[verb]
    with pytest.raises(ApiException) as raised:
        action()
    assert raised.value.status == 403
