"""Test harness for the reference controller: its RBAC from deploy/rbac.yaml, a ServiceAccount kubeconfig
(TokenRequest), the installed ``reference-controller`` as a real process, and cluster observations.

A module rather than conftest-only fixtures so the tests and bench/bench_controller.py can import it
(pytest runs with importlib mode and ``pythonpath = tests/controller``).
"""

from __future__ import annotations

import copy
import itertools
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import yaml
from fabric_harness import TEST_FABRIC
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from fake_drivers.controller.settings import DEFAULT_DRIVER, DRIVER_LABEL
from fake_drivers.dra import RESOURCE_GROUP, RESOURCE_VERSION, identity
from fake_drivers.pools import current_pools

RBAC_FILE = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
# Every node of the local cluster the fabric reaches (fabric_harness.TEST_FABRIC: fabric-0 and fabric-1).
TEST_NODES = sorted({node for fabric in TEST_FABRIC["fabrics"] for node in fabric["nodes"]})
G, V = RESOURCE_GROUP, RESOURCE_VERSION


# --- RBAC and credentials ---------------------------------------------------------------------------------


def rbac_manifests(driver: str, namespace: str, name: str, *, drop_driver_rule: bool = False) -> list[dict[str, Any]]:
    """deploy/rbac.yaml for `driver`, with the ServiceAccount in `namespace` and cluster objects named `name`."""
    docs = [d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d]
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        doc["metadata"]["name"] = name
        if doc["kind"] == "ServiceAccount":
            doc["metadata"]["namespace"] = namespace
        elif doc["kind"] == "ClusterRole":
            rules = []
            for rule in doc["rules"]:
                if "resourceclaims/driver" in rule["resources"]:
                    if drop_driver_rule:
                        continue
                    assert rule["resourceNames"] == [DEFAULT_DRIVER], "rbac.yaml: expected the default driver name"
                    rule["resourceNames"] = [driver]
                rules.append(rule)
            doc["rules"] = rules
        elif doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = name
            doc["subjects"] = [{**doc["subjects"][0], "name": name, "namespace": namespace}]
        out.append(doc)
    return out


def api_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


# --- the controller process -------------------------------------------------------------------------------


@dataclass
class ControllerProcess:
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port_file: Path

    @classmethod
    def start(cls, workdir: Path, kubeconfig: Path, fabric_url: str, driver: str, *flags: str) -> ControllerProcess:
        script = Path(sys.executable).parent / "reference-controller"
        assert script.exists(), f"console script not installed next to {sys.executable}"
        stamp = time.monotonic_ns()
        log = workdir / f"controller-{stamp}.log"
        port_file = workdir / f"controller-{stamp}.metrics-port"
        args = [
            str(script),
            "--kubeconfig",
            str(kubeconfig),
            "--fabric-manager",
            fabric_url,
            "--driver",
            driver,
            "--metrics-port-file",
            str(port_file),
            "--poll",
            "0.25",
            *flags,
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        return cls(proc, log, port_file)

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(10)

    def kill(self) -> int:
        self.proc.kill()
        return self.proc.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        port = int(self.metrics_port_file.read_text())
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def driver_slices(api: client.CustomObjectsApi, driver: str) -> list[dict[str, Any]]:
    return api.list_cluster_custom_object(G, V, "resourceslices", field_selector=f"spec.driver={driver}")["items"]


def fabric_pool(api: client.CustomObjectsApi, driver: str, fabric: str) -> dict[str, Any] | None:
    """The fabric's pool as one slice: its first slice with the devices of every slice of the pool's newest
    generation; None until all `resourceSliceCount` slices of that generation are there."""
    pool = current_pools(driver_slices(api, driver)).get((driver, fabric))
    if pool is None or not pool.complete or pool.slices[0]["spec"].get("nodeName"):
        return None
    merged = copy.deepcopy(pool.slices[0])
    merged["spec"]["devices"] = pool.devices
    return merged


def taint_rules(api: client.CustomObjectsApi, driver: str) -> list[dict[str, Any]]:
    return api.list_cluster_custom_object(G, V, "devicetaintrules", label_selector=f"{DRIVER_LABEL}={driver}")["items"]


def claims(api: client.CustomObjectsApi, namespace: str | None = None) -> list[dict[str, Any]]:
    if namespace:
        return api.list_namespaced_custom_object(G, V, namespace, "resourceclaims")["items"]
    return api.list_cluster_custom_object(G, V, "resourceclaims")["items"]


def pod_claim(api: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, pod: str) -> dict[str, Any]:
    p = core.read_namespaced_pod(pod, namespace)
    statuses = p.status.resource_claim_statuses or []
    if not statuses or not statuses[0].resource_claim_name:
        raise LookupError(f"pod {namespace}/{pod} has no claim yet")
    return api.get_namespaced_custom_object(G, V, namespace, "resourceclaims", statuses[0].resource_claim_name)


def results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return (allocation.get("devices") or {}).get("results") or []


def device_conditions(claim: dict[str, Any], result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    for entry in (claim.get("status") or {}).get("devices") or []:
        if (entry["driver"], entry["pool"], entry["device"]) == (result["driver"], result["pool"], result["device"]):
            return {c["type"]: c for c in entry.get("conditions") or []}
    return {}


def cleanup_driver(api: client.CustomObjectsApi, driver: str) -> list[str]:
    """Remove the slices and taint rules of `driver` (what the controller and node driver publish)."""
    left = []
    for plural, items in (
        ("resourceslices", driver_slices(api, driver)),
        ("devicetaintrules", taint_rules(api, driver)),
    ):
        for item in items:
            try:
                api.delete_cluster_custom_object(G, V, plural, item["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    left.append(f"{plural}/{item['metadata']['name']}: {exc.status}")
    return left


# --- invariants watched during a test ----------------------------------------------------------------------


def _tainted(rules: list[dict[str, Any]], driver: str, pool: str, device: str) -> bool:
    for rule in rules:
        spec = rule["spec"]
        sel = spec.get("deviceSelector") or {}
        if spec["taint"].get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if all(sel.get(k) in (None, v) for k, v in (("driver", driver), ("pool", pool), ("device", device))):
            return True
    return False


def observe_invariants(api: client.CustomObjectsApi, driver: str, fabric_names: dict[str, str]) -> dict[str, Any]:
    """One observation: physical devices offered free by more than one device entry (of the newest generation of
    each pool, which may span several slices), and held by more than one claim. `fabric_names` maps fabric device
    name -> uuid (the node driver republishes under that name).

    "Held" is computed from one LIST of claims (one resourceVersion), so it is exact; "offered" combines three
    lists taken one after the other, so callers confirm it over two observations in a row.
    """
    all_claims = claims(api)
    held: dict[str, list[str]] = {}
    allocated: set[tuple[str, str]] = set()
    for c in all_claims:
        for r in results(c):
            if r["driver"] != driver:
                continue
            allocated.add((r["pool"], r["device"]))
            conds = device_conditions(c, r)
            if any(conds.get(t, {}).get("status") == "True" for t in r.get("bindingFailureConditions") or []):
                continue  # a failed allocation never binds; the scheduler is about to clear it
            ident = fabric_names.get(r["device"])
            if ident:
                held.setdefault(ident, []).append(f"{c['metadata']['namespace']}/{c['metadata']['name']}")
    pools = current_pools(driver_slices(api, driver)).values()
    rules = api.list_cluster_custom_object(G, V, "devicetaintrules")["items"]
    offered: Counter[str] = Counter()
    for p in pools:
        # Only a pool's newest generation is offered (also while incomplete: exact-count requests still use it);
        # a device that moved between slices of one pool is in an old and a new slice, offered once.
        pool = p.name
        for d in p.devices:
            ident = identity(d)
            if not ident or (pool, d["name"]) in allocated or d.get("taints"):
                continue
            if _tainted(rules, driver, pool, d["name"]):
                continue
            offered[ident] += 1
    return {
        "held_twice": {u: hs for u, hs in held.items() if len(hs) > 1},
        "offered_twice": {u: n for u, n in offered.items() if n > 1},
        # Held through one copy, offered free through another: the next allocation would hold it twice.
        "offered_while_held": {u: held[u] for u in offered if u in held},
    }


class _Background:
    """Runs `_run` in a daemon thread for the length of a with-block; `_run` stops when `_stop` is set."""

    _stop: threading.Event
    _thread: threading.Thread

    def __enter__(self) -> Self:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        raise NotImplementedError


@dataclass
class InvariantWatcher(_Background):
    """Observes the invariants every `interval` s for the whole of a test; `violations` says what broke when."""

    api: client.CustomObjectsApi
    driver: str
    fabric_names: dict[str, str]
    interval: float = 0.1
    violations: list[str] = field(default_factory=list)
    observations: int = 0

    def _run(self) -> None:
        previous: dict[str, Any] = {"offered_twice": {}, "offered_while_held": {}}
        while not self._stop.wait(self.interval):
            try:
                seen = observe_invariants(self.api, self.driver, self.fabric_names)
            except (ApiException, OSError):
                continue
            self.observations += 1
            stamp = time.strftime("%H:%M:%S")
            for u, hs in seen["held_twice"].items():
                self.violations.append(f"{stamp} device {u} held by two claims: {hs}")
            # These two combine three lists read one after the other: confirmed over two observations in a row.
            for u, n in seen["offered_twice"].items():
                if u in previous["offered_twice"]:
                    self.violations.append(f"{stamp} device {u} offered free by {n} slice entries")
            for u, hs in seen["offered_while_held"].items():
                if u in previous["offered_while_held"]:
                    self.violations.append(f"{stamp} device {u} offered free while held by {hs}")
            previous = seen


@dataclass
class ClaimHistory(_Background):
    """Every allocation a namespace's claims go through, from a watch (one entry per change of allocation).

    An allocation is (pool, device, node) per result; None is "not allocated". A rewrite in place would show as
    two different allocations in a row without None between them.
    """

    api: client.CustomObjectsApi
    namespace: str
    history: dict[str, list[tuple[tuple[str, str, str | None], ...] | None]] = field(default_factory=dict)
    conditions: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # claim -> (type, reason, msg)

    def _run(self) -> None:
        from kubernetes import watch

        from fake_drivers.controller.model import allocation_node

        version = ""
        while not self._stop.is_set():
            try:
                stream = watch.Watch()
                for event in stream.stream(
                    self.api.list_namespaced_custom_object,
                    G,
                    V,
                    self.namespace,
                    "resourceclaims",
                    resource_version=version,
                    timeout_seconds=2,
                ):
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    name = obj["metadata"]["name"]
                    allocation = (obj.get("status") or {}).get("allocation")
                    key = None
                    if allocation:
                        node = allocation_node(allocation)
                        key = tuple((r["pool"], r["device"], node) for r in results(obj))
                    seen = self.history.setdefault(name, [])
                    if not seen or seen[-1] != key:
                        seen.append(key)
                    for r in results(obj):
                        for cond in device_conditions(obj, r).values():
                            entry = (cond["type"], cond.get("reason", ""), cond.get("message", ""))
                            if cond["status"] == "True" and entry not in self.conditions.setdefault(name, []):
                                self.conditions[name].append(entry)
                    if self._stop.is_set():
                        return
            except (ApiException, OSError):
                version = ""
                self._stop.wait(0.2)

    def in_place_rewrites(self) -> list[str]:
        out = []
        for name, seen in self.history.items():
            for before, after in itertools.pairwise(seen):
                if before is not None and after is not None and before != after:
                    out.append(f"{name}: {before} -> {after}")
        return out


def observe_counted(api: client.CustomObjectsApi, driver: str, fabric_url: str) -> dict[tuple[str, str], str]:
    """Count-based pools: (fabric, model) -> "offered N, free M" where the entries offered free (listed in the
    pool's newest generation, not allocated, not tainted; no identity, so counted per model) exceed the devices the
    fabric manager's probe reports free. The probe is read last: a device freed meanwhile only raises its count."""
    allocated = {(r["pool"], r["device"]) for c in claims(api) for r in results(c) if r["driver"] == driver}
    pools = current_pools(driver_slices(api, driver)).values()
    rules = api.list_cluster_custom_object(G, V, "devicetaintrules")["items"]
    offered: Counter[tuple[str, str]] = Counter()
    for p in pools:
        if p.slices[0]["spec"].get("nodeName"):
            continue
        for d in p.devices:
            if (p.name, d["name"]) in allocated or d.get("taints") or _tainted(rules, driver, p.name, d["name"]):
                continue
            offered[(p.name, d["attributes"]["model"]["string"])] += 1
    free = {(f["fabric"], f["model"]): f["free"] for f in httpx.get(f"{fabric_url}/v1/attachments").json()["free"]}
    return {key: f"offered {n}, free {free.get(key, 0)}" for key, n in offered.items() if n > free.get(key, 0)}


@dataclass
class CountedWatcher(_Background):
    """Count-based pools, for the whole of a test: offered free entries never exceed the fabric's free devices
    (confirmed over two observations in a row, since the lists are read one after the other)."""

    api: client.CustomObjectsApi
    driver: str
    fabric_url: str
    interval: float = 0.1
    violations: list[str] = field(default_factory=list)
    observations: int = 0

    def _run(self) -> None:
        previous: dict[tuple[str, str], str] = {}
        while not self._stop.wait(self.interval):
            try:
                seen = observe_counted(self.api, self.driver, self.fabric_url)
            except (ApiException, OSError, ValueError, httpx.HTTPError):
                continue
            self.observations += 1
            stamp = time.strftime("%H:%M:%S")
            self.violations += [f"{stamp} {key}: {what}" for key, what in seen.items() if key in previous]
            previous = seen


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuidlib.uuid4().hex[:8]}"
