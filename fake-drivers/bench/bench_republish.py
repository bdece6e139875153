"""Attach-to-republish latency of the fake node driver: from the fabric manager's 200 on attach to the device
in that node's ResourceSlice (and the same for detach), on a real local cluster.

Starts a local cluster (conformance.cluster.providers.local), the fabric manager and the node driver (default poll
interval 0.5 s) as processes, runs N attach/detach rounds, prints median and p95, cleans everything up.
Usage: python bench/bench_republish.py [--rounds 50] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml
from conformance.cluster.client import Cluster
from conformance.cluster.providers.base import ClusterSpec
from conformance.cluster.providers.local import LocalProvider
from kubernetes import client

from bench_fabric import start_server
from fake_drivers.dra import RESOURCE_GROUP, RESOURCE_VERSION, identity, slice_name

DRIVER = "bench.fabric.example.com"


def node_uuids(api: client.CustomObjectsApi, node: str) -> set[str]:
    item = api.get_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", slice_name(DRIVER, node))
    return {ident for d in item["spec"].get("devices", []) if (ident := identity(d))}


def until(check, limit: float = 10.0) -> float:
    """Seconds until check() holds, polling every 10 ms (the measurement's resolution)."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > limit:
            raise SystemExit(f"not seen within {limit}s")
        time.sleep(0.01)
    return time.monotonic() - started


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    provider = LocalProvider(progress=lambda m: print(m, file=sys.stderr))
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            cluster = Cluster(provider.start(ClusterSpec()))
            fabric, port = start_server(
                work,
                {
                    "attachSeconds": 0.05,
                    "detachSeconds": 0.05,
                    "fabrics": [
                        {"id": "fabric-0", "nodes": ["node-0"], "devices": [{"model": "fake-gpu", "count": 1}]}
                    ],
                },
            )
            procs.append(fabric)
            (work / "nodes.yaml").write_text(yaml.safe_dump({"driver": DRIVER, "nodes": {"node-0": {}}}))
            procs.append(
                subprocess.Popen(
                    [
                        str(Path(sys.executable).parent / "fake-node-driver"),
                        "--kubeconfig",
                        str(cluster.info.kubeconfig),
                        "--config",
                        str(work / "nodes.yaml"),
                        "--fabric-manager",
                        f"http://127.0.0.1:{port}",
                        "--interval",
                        str(args.interval),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            api = client.CustomObjectsApi(cluster.api)
            http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
            dev = http.get("/v1/devices").json()["devices"][0]["uuid"]
            until(lambda: _exists(api))
            attach, detach = [], []
            for _ in range(args.rounds):
                assert http.post(f"/v1/devices/{dev}/attach", json={"node": "node-0"}).status_code == 200
                attach.append(until(lambda: dev in node_uuids(api, "node-0")))
                assert http.post(f"/v1/devices/{dev}/detach").status_code == 200
                detach.append(until(lambda: dev not in node_uuids(api, "node-0")))
            for name, values in (("attach -> republished", attach), ("detach -> removed", detach)):
                print(
                    f"{name}: median {statistics.median(values):.3f}s, p95 {percentile(values, 95):.3f}s, "
                    f"max {max(values):.3f}s over {len(values)} (node driver poll interval {args.interval}s)"
                )
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(30)
            provider.stop()


def _exists(api: client.CustomObjectsApi) -> bool:
    try:
        node_uuids(api, "node-0")
    except client.exceptions.ApiException:
        return False
    return True


if __name__ == "__main__":
    main()
