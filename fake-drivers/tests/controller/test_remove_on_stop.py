"""--remove-on-stop: a controller that is stopped (SIGTERM, an uninstall) removes the fabric pools and taint rules it
wrote, so nothing of it stays offered in the cluster. Real cluster, fabric manager and controller processes."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import pod_with_claim_template
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from controller_harness import ControllerProcess, driver_slices, taint_rules
from kubernetes import client
from test_controller_cluster import wait_pools


def test_stopped_controller_removes_its_fabric_pools_and_taint_rules(
    cluster: Cluster,
    objects: ObjectTracker,
    namespace: str,
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
) -> None:
    controller = start_controller("--remove-on-stop", "--quarantine", "300")
    wait_pools(api, driver)
    # A failed attach leaves a quarantine rule (kept for 300 s): something of the controller's besides its pools.
    fabric_http.post("/v1/faults", json={"mode": "fail", "reason": "FabricLinkDown"}).raise_for_status()
    objects.create(pod_with_claim_template("app", "gpu"), namespace)
    wait_for(lambda: taint_rules(api, driver), bool, timeout=60, expected=f"a quarantine rule of {driver}")
    assert controller.stop() == 0, controller.output()[-3000:]
    assert "removed" in controller.output() and not taint_rules(api, driver), taint_rules(api, driver)
    assert not driver_slices(api, driver), [s["metadata"]["name"] for s in driver_slices(api, driver)]
