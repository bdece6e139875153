"""The suite's fault-injector client against the reference fabric manager (a real HTTP server on 127.0.0.1, in a
thread): scope checks, faults armed by node with the record of what they hit, release by fault id, cleanup."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fake_drivers.fabric.config import build_config
from fake_drivers.fabric.manager import FabricManager
from fake_drivers.fabric.server import ServerThread
from fake_drivers.fabric.store import Store

from conformance.cluster.waits import wait_for
from conformance.implementation.faults import FaultInjector

FABRIC = {
    "attachSeconds": 0.02,
    "detachSeconds": 0.02,
    "fabrics": [{"id": "fabric-0", "nodes": ["node-0", "node-2"], "devices": [{"model": "gpu", "count": 3}]}],
}


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    manager = FabricManager(build_config(FABRIC), Store(tmp_path / "fabric.db"))
    server = ServerThread(manager).start()
    uuids = [d["uuid"] for d in httpx.get(f"{server.url}/v1/devices").json()["devices"]]
    yield server.url, uuids
    server.stop()
    manager.close()


def attach(url: str, uuid: str, node: str) -> int:
    return httpx.post(f"{url}/v1/devices/{uuid}/attach", json={"node": node}, timeout=10).status_code


def test_faults_only_on_leased_devices_or_the_scenarios_nodes(fabric: tuple[str, list[str]]) -> None:
    url, uuids = fabric
    faults = FaultInjector(f"{url}/v1/faults", frozenset(uuids[:1]), nodes=frozenset({"node-2"}))
    with pytest.raises(ValueError, match="not leased"):
        faults.arm("fail", uuids[1])
    with pytest.raises(ValueError, match="needs a node of the scenario"):
        faults.arm("fail", node="node-0")
    with pytest.raises(ValueError, match="needs a node of the scenario"):
        faults.arm("fail", model="gpu")


def test_a_node_fault_tells_which_device_it_hit(fabric: tuple[str, list[str]]) -> None:
    url, uuids = fabric
    with FaultInjector(f"{url}/v1/faults", frozenset(), nodes=frozenset({"node-2"})) as faults:
        fault = faults.arm("fail", node="node-2", model="gpu", reason="Injected")
        assert attach(url, uuids[0], "node-0") == 200  # another node: untouched
        assert attach(url, uuids[1], "node-2") == 503
        assert [(h["device"], h["node"]) for h in faults.hits(fault)] == [(uuids[1], "node-2")]
        assert faults.disarm(fault) is None  # used up


def test_close_releases_what_its_node_faults_made_hang(fabric: tuple[str, list[str]]) -> None:
    url, uuids = fabric
    codes: list[int] = []
    faults = FaultInjector(f"{url}/v1/faults", frozenset(), nodes=frozenset({"node-2"}))
    faults.arm("hang", node="node-2")
    waiter = threading.Thread(target=lambda: codes.append(attach(url, uuids[2], "node-2")))
    waiter.start()
    wait_for(faults.hung, bool, timeout=10, expected="the attach to node-2 to hang")
    assert [op["device"] for op in faults.hung()] == [uuids[2]]
    faults.close()
    waiter.join(10)
    assert codes == [200]
    assert faults.hung() == []


def test_release_by_fault_id_lets_only_that_fault_go(fabric: tuple[str, list[str]]) -> None:
    url, uuids = fabric
    codes: dict[str, int] = {}
    with FaultInjector(f"{url}/v1/faults", frozenset(uuids[:1]), nodes=frozenset({"node-2"})) as faults:
        by_node = faults.arm("hang", node="node-2")
        faults.arm("hang", uuids[0])
        threads = [
            threading.Thread(target=lambda: codes.__setitem__("node", attach(url, uuids[1], "node-2"))),
            threading.Thread(target=lambda: codes.__setitem__("device", attach(url, uuids[0], "node-0"))),
        ]
        for t in threads:
            t.start()
        wait_for(faults.hung, lambda hung: len(hung) == 2, timeout=10, expected="both attaches hung")
        released = faults.release_fault(by_node, "fail")
        assert [op["device"] for op in released] == [uuids[1]]
        threads[0].join(10)
        assert codes == {"node": 503}
    threads[1].join(10)
    assert codes["device"] == 200  # released by close()
