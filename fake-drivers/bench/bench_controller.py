"""Time from pod creation to bound through the reference controller, on a real local cluster.

Starts a local cluster (the conformance suite's local provider; or uses --kubeconfig), the fake fabric manager,
the node driver and the reference controller (with its ServiceAccount's token), then creates --pods pods one
after the other, each asking for one fabric device, and waits for each to be bound. Between pods it deletes the
pod and waits until the fabric has nothing attached, so every pod goes through a full attach. Timestamps are
taken when a watch delivers the change, on this machine's clock. It prints, per segment, median and p95:

  schedule   pod created -> claim allocated (scheduler: filter, allocate, PreBind writes the allocation)
  attach     allocated -> binding condition True (controller + fabric attach)
  poll wait  condition True -> pod bound: the scheduler's PreBind polls the claim every 5 s
  total      pod created -> bound

In reschedule-to-local mode it also counts reallocation rounds and where pods ended. A benchmark prints
figures; it passes or fails nothing. Usage (from fake-drivers/):
  python bench/bench_controller.py [--pods 20] [--mode keep-in-pool|reschedule-to-local] [--attach-seconds 1.0]
                                   [--kubeconfig K] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from urllib3.exceptions import HTTPError

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / d) for d in ("controller", "fabric", "nodedriver")]

from conformance.implementation.serviceaccount import service_account_kubeconfig  # noqa: E402 - test tooling, as in the tests
from controller_harness import (  # noqa: E402
    TEST_NODES,
    ControllerProcess,
    cleanup_driver,
    rbac_manifests,
    results,
)
from fabric_harness import FabricProcess, write_config  # noqa: E402
from nodedriver_harness import NodeDriverProcess  # noqa: E402

from fake_drivers.controller.model import allocation_node  # noqa: E402

DRIVER = "bench.fabric.example.com"
NAMESPACE = "bench-controller"
G, V = "resource.k8s.io", "v1"


class Recorder(threading.Thread):
    """Watches the namespace's pods and claims; keeps when each change was first seen (time.time())."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(daemon=True)
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.first: dict[tuple[str, str], float] = {}  # (object, event) -> time
        self.allocations: dict[str, list[tuple[Any, float]]] = defaultdict(list)  # claim -> [(allocation, t)]
        self.stop = threading.Event()

    def run(self) -> None:
        threads = [threading.Thread(target=self._pods, daemon=True), threading.Thread(target=self._claims, daemon=True)]
        for t in threads:
            t.start()
        self.stop.wait()

    def _mark(self, key: tuple[str, str]) -> None:
        self.first.setdefault(key, time.time())

    def _pods(self) -> None:
        while not self.stop.is_set():
            try:
                for event in watch.Watch().stream(self.core.list_namespaced_pod, NAMESPACE, timeout_seconds=30):
                    pod = event["object"]
                    if pod.spec.node_name:
                        self._mark((pod.metadata.name, "bound"))
                    for status in pod.status.resource_claim_statuses or []:
                        if status.resource_claim_name:
                            self._mark((pod.metadata.name, f"claim={status.resource_claim_name}"))
            except (ApiException, OSError, HTTPError):
                if self.stop.wait(0.2):
                    return

    def _claims(self) -> None:
        while not self.stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self.custom.list_namespaced_custom_object, G, V, NAMESPACE, "resourceclaims", timeout_seconds=30
                )
                for event in stream:
                    claim = event["object"]
                    name = claim["metadata"]["name"]
                    allocation = (claim.get("status") or {}).get("allocation")
                    key = None
                    if allocation:
                        key = tuple((r["pool"], r["device"], allocation_node(allocation)) for r in results(claim))
                    seen = self.allocations[name]
                    if not seen or seen[-1][0] != key:
                        seen.append((key, time.time()))
                    for entry in (claim.get("status") or {}).get("devices") or []:
                        for cond in entry.get("conditions") or []:
                            if cond["status"] == "True":
                                self._mark((name, cond["type"].rsplit("/", 1)[1]))
            except (ApiException, OSError, HTTPError):
                if self.stop.wait(0.2):
                    return


@contextmanager
def local_cluster(kubeconfig: str | None) -> Iterator[Path]:
    if kubeconfig:
        yield Path(kubeconfig)
        return
    from conformance.cluster.providers.base import ClusterSpec, default_nodes
    from conformance.cluster.providers.local import LocalProvider

    provider = LocalProvider()
    info = provider.start(ClusterSpec(nodes=default_nodes(len(TEST_NODES))))
    try:
        yield info.kubeconfig
    finally:
        provider.stop()


def create(dyn: DynamicClient, manifest: dict[str, Any], namespace: str | None = None) -> None:
    dyn.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"]).create(
        body=manifest, namespace=namespace
    )


def wait(what: str, check: Any, timeout: float = 120.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from conformance.cluster.manifests import claim_template, device_class, pod_with_claim_template

    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        workdir = Path(tmp)
        kubeconfig = stack.enter_context(local_cluster(args.kubeconfig))
        api = config.new_client_from_config(config_file=str(kubeconfig))
        core, custom, dyn = client.CoreV1Api(api), client.CustomObjectsApi(api), DynamicClient(api)

        fabric = FabricProcess.start(
            write_config(workdir / "fabric.yaml", attach_seconds=args.attach_seconds),
            workdir / "fabric.db",
            workdir,
            "--no-access-log",
        )
        stack.callback(fabric.terminate)
        http = stack.enter_context(httpx.Client(base_url=fabric.url))

        create(dyn, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        stack.callback(lambda: core.delete_namespace(NAMESPACE))
        wait("the default ServiceAccount", lambda: core.list_namespaced_service_account(NAMESPACE).items)
        for manifest in rbac_manifests(DRIVER, NAMESPACE, "bench-reference-controller"):
            create(dyn, manifest, manifest["metadata"].get("namespace"))
            if manifest["kind"] != "ServiceAccount":
                kind = dyn.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
                stack.callback(kind.delete, name=manifest["metadata"]["name"])
        sa = service_account_kubeconfig(
            kubeconfig, core, NAMESPACE, "bench-reference-controller", workdir / "sa.kubeconfig"
        )
        create(dyn, device_class(DRIVER, DRIVER))
        stack.callback(lambda: dyn.resources.get(api_version=f"{G}/{V}", kind="DeviceClass").delete(name=DRIVER))
        create(dyn, claim_template("gpu", DRIVER), NAMESPACE)
        stack.callback(lambda: cleanup_driver(custom, DRIVER))

        flags = ("--republish", "--deny-list") if args.mode == "keep-in-pool" else ("--republish",)
        nodes = {n: {} for n in TEST_NODES}
        node_driver = NodeDriverProcess.start(workdir, kubeconfig, fabric.url, DRIVER, *flags, nodes=nodes)
        stack.callback(node_driver.stop)
        controller = ControllerProcess.start(
            workdir, sa, fabric.url, DRIVER, "--mode", args.mode, "--idle-grace", "1", "--poll", "1.0"
        )
        stack.callback(controller.stop)
        wait(
            "the fabric pools",
            lambda: (
                len(
                    custom.list_cluster_custom_object(
                        G, V, "resourceslices", label_selector=f"fake-drivers.example.com/driver={DRIVER}"
                    )["items"]
                )
                == 2
            ),
        )

        recorder = Recorder(api)
        recorder.start()
        stack.callback(recorder.stop.set)
        rows = []
        for i in range(args.pods):
            name = f"pod-{i:03d}"
            created = time.time()
            create(dyn, pod_with_claim_template(name, "gpu"), NAMESPACE)
            wait(f"{name} bound", lambda n=name: (n, "bound") in recorder.first, timeout=180, interval=0.02)
            claim = next(k[1].split("=", 1)[1] for k in recorder.first if k[0] == name and k[1].startswith("claim="))
            wait(f"{name}'s claim seen allocated", lambda c=claim: any(a for a, _ in recorder.allocations[c]))
            allocations = recorder.allocations[claim]
            allocated = next(t for a, t in allocations if a)
            row = {
                "pod": name,
                "created": created,
                "allocated": allocated,
                "condition": recorder.first.get((claim, "attached")),
                "reschedule": recorder.first.get((claim, "reschedule")),
                "deallocated": next((t for a, t in allocations if a is None and t > allocated), None),
                "bound": recorder.first[(name, "bound")],
                "rounds": sum(1 for a, _ in allocations if a and a[0][0].startswith("fabric-")),
                "final": allocations[-1][0],
                "first": next(a for a, _ in allocations if a),
            }
            rows.append(row)
            marks = ", ".join(
                f"{k} +{row[k] - created:.2f}s"
                for k in ("allocated", "reschedule", "deallocated", "condition")
                if row[k]
            )
            path = " -> ".join(f"{a[0][0]}/{a[0][1]}@{a[0][2]}" if a else "deallocated" for a, _ in allocations)
            print(f"{name}: bound after {row['bound'] - created:.2f}s ({marks}): {path}", flush=True)
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
            wait(
                f"{name} gone",
                lambda n=name: not core.list_namespaced_pod(NAMESPACE, field_selector=f"metadata.name={n}").items,
            )
            wait(
                "the fabric to have nothing attached",
                lambda: not http.get("/v1/attachments").json()["attachments"],
                interval=0.2,
            )
        metrics = controller.metrics()
    return summarize(rows, args, metrics)


def summarize(rows: list[dict[str, Any]], args: argparse.Namespace, metrics: str) -> dict[str, Any]:
    if args.mode == "keep-in-pool":
        segments = {
            "schedule": [r["allocated"] - r["created"] for r in rows],
            "attach": [r["condition"] - r["allocated"] for r in rows if r["condition"]],
            "poll wait": [r["bound"] - r["condition"] for r in rows if r["condition"]],
            "total": [r["bound"] - r["created"] for r in rows],
        }
    else:
        # Pods moved to the node-local copy in one round; the others are in "total, 2 rounds".
        moved = [r for r in rows if r["rounds"] == 1 and r["reschedule"] and r["deallocated"]]
        segments = {
            "schedule": [r["allocated"] - r["created"] for r in moved],
            "attach+republish": [r["reschedule"] - r["allocated"] for r in moved],
            "poll wait": [r["deallocated"] - r["reschedule"] for r in moved],
            "realloc+bind": [r["bound"] - r["deallocated"] for r in moved],
            "total": [r["bound"] - r["created"] for r in moved],
            "total, 2 rounds": [r["bound"] - r["created"] for r in rows if r["rounds"] == 2],
        }
    figures: dict[str, Any] = {
        "mode": args.mode,
        "pods": len(rows),
        "attach_seconds": args.attach_seconds,
        "segments": {
            k: {"median": statistics.median(v), "p95": pct(v, 0.95), "min": min(v), "max": max(v)}
            for k, v in segments.items()
            if v
        },
    }
    total = figures["segments"]["total"]["median"]
    poll = figures["segments"].get("poll wait", {}).get("median", 0.0)
    figures["poll_wait_share_of_median_total"] = poll / total if total else 0.0
    if args.mode == "reschedule-to-local":
        counts: dict[int, int] = defaultdict(int)
        for r in rows:
            counts[r["rounds"]] += 1
        figures["rounds"] = dict(sorted(counts.items()))
        figures["ended_node_local_same_device"] = sum(
            1 for r in rows if not r["final"][0][0].startswith("fabric-") and r["final"][0][1] == r["first"][0][1]
        )
        figures["ended_node_local"] = sum(1 for r in rows if not r["final"][0][0].startswith("fabric-"))
    figures["controller_metrics"] = [
        line
        for line in metrics.splitlines()
        if line.startswith("reference_controller_attach_seconds_sum")
        or line.startswith("reference_controller_attach_seconds_count")
    ]
    print(f"\n{len(rows)} pods, one after the other, mode {args.mode}, attach {args.attach_seconds:g}s")
    print(f"{'segment':<17} {'n':>3} {'median':>8} {'p95':>8} {'min':>8} {'max':>8}")
    for name, f in figures["segments"].items():
        n = len(segments[name])
        print(f"{name:<17} {n:>3} {f['median']:>7.2f}s {f['p95']:>7.2f}s {f['min']:>7.2f}s {f['max']:>7.2f}s")
    print(f"poll wait / total (medians): {figures['poll_wait_share_of_median_total']:.0%}")
    if "rounds" in figures:
        print(
            f"fabric allocation rounds per pod: {figures['rounds']}; ended node-local: "
            f"{figures['ended_node_local']} (same physical device: {figures['ended_node_local_same_device']})"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--mode", choices=["keep-in-pool", "reschedule-to-local"], default="keep-in-pool")
    parser.add_argument("--attach-seconds", type=float, default=1.0)
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting a local one")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
