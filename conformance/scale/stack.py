"""The reference implementation sized for one point of `make scale`: a fabric configuration that reaches every node
(several fabrics, node-<i> cabled to fabric i mod F, as the local provider labels them) with enough devices for the
stress, and a profile that starts the reference fabric manager and controller on it.

The reference node driver is left out: it lists every node and every one of its slices on each 0.5 s poll, which
is the reference's own limit, not the scheduler's, and keep-in-pool needs no node-local copy. Every node still has
a slice of its own (the suite-owned node-local pools of the baseline, one per node), as a cluster whose nodes all
run a DRA driver has.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from conformance.cluster.providers.base import FABRIC_LABEL, NodeSpec

REPO = Path(__file__).resolve().parents[2]
DRIVER = "gpu.fabric.example.com"  # the reference controller's default driver
IDENTITY = "uuid"
MODEL = "fake-gpu"
HEADROOM = 1.25  # devices per pod: a fabric never runs dry because the scheduler spread pods unevenly
ATTACH_S = 1.0  # the example fabric's attach time (fixtures/profiles/reference/fabric.yaml)


def devices_per_fabric(pods: int, fabrics: int) -> int:
    """Enough fabric devices for `pods` pods of one device each, whichever fabric the scheduler picks."""
    return max(1, math.ceil(pods * HEADROOM / fabrics))


def fabric_config(nodes: list[NodeSpec], fabrics: int, per_fabric: int) -> dict[str, Any]:
    """fake-fabric-manager's configuration: fabric-<f> reaches the nodes labelled with it, `per_fabric` GPUs each."""
    reach: dict[str, list[str]] = {f"fabric-{f}": [] for f in range(fabrics)}
    for node in nodes:
        reach[node.labels[FABRIC_LABEL]].append(node.name)
    attributes = {"vendor": "example.com", "productName": "Fake GPU 80GB", "memoryGiB": 80, "driverVersion": "1.0.0"}
    return {
        "attachSeconds": ATTACH_S,
        "detachSeconds": ATTACH_S,
        "fabrics": [
            {"id": fabric, "nodes": names, "devices": [{"model": MODEL, "count": per_fabric, "attributes": attributes}]}
            for fabric, names in reach.items()
            if names
        ],
    }


def profile(fabric_yaml: Path, devices: int) -> dict[str, Any]:
    """The reference profile (fixtures/profiles/reference.yaml) without the node driver, on `fabric_yaml`."""
    deploy = REPO / "fake-drivers" / "deploy"
    return {
        "apiVersion": "dra-conformance.example.com/v1alpha1",
        "kind": "ImplementationProfile",
        "name": "reference-scale",
        "version": "0.1.0",
        "driver": DRIVER,
        "identityAttribute": IDENTITY,
        "bindingModel": "keep-in-pool",
        "fabricEntries": "identified",
        "failureConditions": {f"{DRIVER}/attach-failed": "failure", f"{DRIVER}/reschedule": "reschedule"},
        "manifests": [
            str(REPO / "fixtures" / "profiles" / "reference" / "namespace.yaml"),
            str(deploy / "rbac.yaml"),
            str(deploy / "own-slices.yaml"),
        ],
        "processes": [
            {
                "name": "fabric-manager",
                "command": [
                    "{bin}/fake-fabric-manager",
                    *("--config", str(fabric_yaml), "--db", "{workdir}/fabric.db"),
                    *("--port", "0", "--port-file", "{port_file}", "--no-access-log"),
                ],
                "portFile": True,
                "ready": {"http": "/healthz"},
            },
            {
                "name": "controller",
                "command": [
                    "{bin}/reference-controller",
                    *("--kubeconfig", "{sa_kubeconfig:dra-fabric-system/reference-controller}"),
                    *("--fabric-manager", "{url:fabric-manager}", "--remove-on-stop", "--mode", "keep-in-pool"),
                ],
                "ready": {"log": "caches synced; reconciling"},
            },
        ],
        "controller": {"process": "controller", "serviceAccount": "dra-fabric-system/reference-controller"},
        "published": {"fabricDevices": devices, "perModel": {MODEL: devices}, "settleSeconds": 2},
        "promises": {"attachSeconds": 10, "detachSeconds": 25},
        "fabricProbe": {"url": "{url:fabric-manager}/v1/attachments"},
        "faultInjector": {"url": "{url:fabric-manager}/v1/faults"},
    }


def write_stack(folder: Path, nodes: list[NodeSpec], fabrics: int, pods: int) -> tuple[Path, int]:
    """Write fabric.yaml and profile.yaml into `folder`; (the profile, fabric devices in all)."""
    per_fabric = devices_per_fabric(pods, fabrics)
    config = fabric_config(nodes, fabrics, per_fabric)
    total = per_fabric * len(config["fabrics"])
    folder.mkdir(parents=True, exist_ok=True)
    fabric_yaml = folder / "fabric.yaml"
    fabric_yaml.write_text(yaml.safe_dump(config))
    path = folder / "profile.yaml"
    path.write_text(yaml.safe_dump(profile(fabric_yaml, total), sort_keys=False))
    return path, total
