"""Fixtures for the node driver tests: a real local cluster (the conformance plugin's `cluster`), a real fabric
manager process and the node driver as a real process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import unique_driver
from fabric_harness import FabricProcess
from kubernetes import client
from nodedriver_harness import NodeDriverProcess


@pytest.fixture
def driver() -> str:
    return unique_driver("nd")


@pytest.fixture
def slices_api(cluster: Cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api)


@pytest.fixture
def start_node_driver(
    cluster: Cluster, fabric_proc: FabricProcess, driver: str, tmp_path: Path
) -> Iterator[Callable[..., NodeDriverProcess]]:
    started: list[NodeDriverProcess] = []

    def start(*flags: str, nodes: dict[str, Any] | None = None) -> NodeDriverProcess:
        proc = NodeDriverProcess.start(tmp_path, cluster.info.kubeconfig, fabric_proc.url, driver, *flags, nodes=nodes)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        code = proc.stop()
        assert code == 0, f"node driver exited with {code}:\n{proc.output()[-3000:]}"
