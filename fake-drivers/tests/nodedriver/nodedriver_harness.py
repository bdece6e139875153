"""Test harness for the node driver: the installed console script as a real process, and slice queries."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from fake_drivers.dra import RESOURCE_GROUP, RESOURCE_VERSION, identity

# Every node of the local cluster; node-0 and node-1 have one local GPU, node-2 and node-3 none.
NODES_CONFIG: dict[str, Any] = {
    "nodes": {
        "node-0": {"local": [{"model": "fake-gpu", "count": 1}]},
        "node-1": {"local": [{"model": "fake-gpu", "count": 1}]},
        "node-2": {},
        "node-3": {},
    }
}


@dataclass
class NodeDriverProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(
        cls,
        workdir: Path,
        kubeconfig: Path,
        fabric_url: str,
        driver: str,
        *flags: str,
        nodes: dict[str, Any] | None = None,
    ) -> NodeDriverProcess:
        """Run fake-node-driver for `nodes` (default NODES_CONFIG's) with a fast poll."""
        config = workdir / "nodes.yaml"
        config.write_text(yaml.safe_dump({"nodes": nodes or NODES_CONFIG["nodes"], "driver": driver}))
        script = Path(sys.executable).parent / "fake-node-driver"
        log = workdir / "node-driver.log"
        args = [
            str(script),
            "--kubeconfig",
            str(kubeconfig),
            "--config",
            str(config),
            "--fabric-manager",
            fabric_url,
            "--interval",
            "0.2",
            *flags,
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        return cls(proc, log)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def driver_slices(api: client.CustomObjectsApi, driver: str) -> dict[str, dict[str, Any]]:
    """All slices of `driver`, by node name ("" for slices without a node, the fabric pool)."""
    items = api.list_cluster_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", field_selector=f"spec.driver={driver}"
    )["items"]
    return {item["spec"].get("nodeName") or "": item for item in items}


def uuids(slice_: dict[str, Any] | None) -> set[str]:
    return {ident for d in (slice_ or {}).get("spec", {}).get("devices", []) if (ident := identity(d))}
