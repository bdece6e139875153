"""Fixtures for the reference controller tests: the real local cluster (the conformance plugin's `cluster`),
a real fabric manager process, the controller as a real process with its own ServiceAccount's token, and the
node driver where a test needs it. Everything is removed at teardown, also when a test fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import claim_template, device_class, unique_driver
from conformance.cluster.objects import ObjectTracker
from conformance.implementation.serviceaccount import service_account_kubeconfig
from controller_harness import (
    TEST_NODES,
    ControllerProcess,
    cleanup_driver,
    rbac_manifests,
    unique_name,
)
from fabric_harness import FabricProcess
from kubernetes import client
from nodedriver_harness import NodeDriverProcess

ATTACH_SECONDS = 0.3


@pytest.fixture
def driver() -> str:
    return unique_driver("rc")


@pytest.fixture
def fabric_attach_seconds() -> float:
    return ATTACH_SECONDS


@pytest.fixture
def fabric_names(fabric_http: httpx.Client) -> dict[str, str]:
    """Fabric device name -> uuid."""
    return {d["name"]: d["uuid"] for d in fabric_http.get("/v1/devices").json()["devices"]}


@pytest.fixture
def api(cluster: Cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api)


@pytest.fixture
def sa_kubeconfig(cluster: Cluster, objects: ObjectTracker, namespace: str, driver: str, tmp_path: Path) -> Path:
    """deploy/rbac.yaml for this test's driver; a kubeconfig with a token of its ServiceAccount."""
    name = unique_name("reference-controller")
    for manifest in rbac_manifests(driver, namespace, name):
        objects.create(manifest)
    return service_account_kubeconfig(
        cluster.info.kubeconfig, cluster.core, namespace, name, tmp_path / "sa.kubeconfig"
    )


@pytest.fixture
def fabric_class(objects: ObjectTracker, namespace: str, driver: str) -> str:
    """A DeviceClass matching every device of the driver (fabric and node-local copies) and a claim template."""
    objects.create(device_class(driver, driver))
    objects.create(claim_template("gpu", driver), namespace)
    return driver


@pytest.fixture
def start_controller(
    sa_kubeconfig: Path,
    fabric_proc: FabricProcess,
    driver: str,
    api: client.CustomObjectsApi,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., ControllerProcess]]:
    started: list[ControllerProcess] = []

    def start(*flags: str) -> ControllerProcess:
        proc = ControllerProcess.start(tmp_path, sa_kubeconfig, fabric_proc.url, driver, *flags)
        started.append(proc)
        return proc

    yield start
    codes = [proc.stop() for proc in started]
    if request.session.testsfailed or any(code not in (0, -9) for code in codes):
        for proc in started:
            print(f"--- controller log {proc.log} ---\n{proc.output()[-6000:]}")
    left = cleanup_driver(api, driver)
    assert not left, f"could not remove: {left}"
    assert all(code in (0, -9) for code in codes), f"controller exit codes {codes}"


@pytest.fixture
def start_node_driver(
    cluster: Cluster, fabric_proc: FabricProcess, driver: str, tmp_path: Path
) -> Iterator[Callable[..., NodeDriverProcess]]:
    """The node driver for every node of the cluster, without local devices (a pod needs a fabric device)."""
    started: list[NodeDriverProcess] = []

    def start(*flags: str) -> NodeDriverProcess:
        proc = NodeDriverProcess.start(
            tmp_path, cluster.info.kubeconfig, fabric_proc.url, driver, *flags, nodes={n: {} for n in TEST_NODES}
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
