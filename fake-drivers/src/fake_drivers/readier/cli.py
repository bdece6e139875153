"""`fake-node-readier`: the node-local readiness daemon of one node (run per node, as a DaemonSet's pod would be).

It publishes its node's devices (those the device manager lists for the node) with binding conditions, readies a
device once the scheduler allocated it on this node (an attach to this node in the device manager: the preparation,
e.g. reprogramming, takes its attach time), then sets the binding condition True; a readying failure sets the
failure condition True with the device manager's reason and message, after the device is hidden from the slice.
Least privilege per node: with a token bound to a pod on its node it writes only its node's slice (an admission
policy) and the conditions of claims allocated on its node (resourceclaims/driver associated-node:*).
Level-triggered: it polls the device manager and the claims, so a restart at any step loses nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import click
import httpx
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ..dra import RESOURCE_GROUP, RESOURCE_VERSION, device_attributes
from ..pools import delete_slice, write_pool
from ..signals import stop_event
from .decide import Conditions, Held, NodeDevice, Policy, decide

MANAGER = "fake-node-readier"
log = logging.getLogger(MANAGER)
# Hidden flags, BROKEN ON PURPOSE: only the suite's selftests use them (tests/selftest), each breaking one requirement.
BROKEN_FLAGS = {
    "--broken-ready-before-prepared": "RDY-3: the binding condition is set True when the readying starts",
    "--broken-no-failure-condition": "RDY-5: a readying failure never sets a failure condition",
    "--broken-write-other-nodes": "RDY-8: the daemon also reports for claims allocated on other nodes (given a "
    "central controller's rights)",
    "--broken-never-ready": "RDY-2: a device is readied, but its binding condition is never written",
    "--broken-stale-ready": "IMP-28: a device readied once is reported ready to its next claim without readying it "
    "again (stale readiness)",
    "--broken-stale-failure": "IMP-28: a device whose readying failed once is reported failed to every later claim, "
    "also once its quarantine is over (a failure not cleared)",
    "--broken-report-before-unpublish": "RDY-5 (order): a readying failure is reported while the failed device is "
    "still published; it is unpublished a second later",
}


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class DeviceManager:
    """The reference's fake hardware (the fake fabric manager, one fabric per node): readying is an attach."""

    def __init__(self, url: str) -> None:
        self._http = httpx.Client(base_url=url, timeout=10.0)
        self._slow = httpx.Client(base_url=url, timeout=None)  # a readying may hang (fault injection)

    def devices(self, fabric: str | None) -> list[NodeDevice]:
        response = self._http.get("/v1/devices", params={"fabric": fabric} if fabric else {})
        response.raise_for_status()
        out = []
        for d in response.json()["devices"]:
            error = d.get("lastError") or {}
            failed = error.get("operation") == "attach"
            out.append(
                NodeDevice(
                    d["uuid"],
                    d["name"],
                    d["model"],
                    d.get("attributes") or {},
                    d["state"],
                    d.get("node"),
                    _epoch(error.get("at")) if failed else None,
                    error.get("reason", "") if failed else "",
                    error.get("message", "") if failed else "",
                )
            )
        return out

    def ready(self, device: NodeDevice, node: str) -> str:
        """Ready (attach) a device on `node`; '' when done, else the failure."""
        try:
            response = self._slow.post(f"/v1/devices/{device.uuid}/attach", json={"node": node})
        except httpx.HTTPError as exc:
            return f"no answer: {exc}"
        return "" if response.status_code == 200 else f"{response.status_code} {response.text[:300]}"

    def unprepare(self, device: NodeDevice) -> str:
        try:
            response = self._http.post(f"/v1/devices/{device.uuid}/detach", json={})
        except httpx.HTTPError as exc:
            return f"no answer: {exc}"
        return "" if response.status_code == 200 else f"{response.status_code} {response.text[:300]}"


class Readier:
    def __init__(
        self,
        api: client.ApiClient,
        manager: DeviceManager,
        node: str,
        node_uid: str,
        driver: str,
        conditions: Conditions,
        policy: Policy,
        all_nodes: bool = False,
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.manager = manager
        self.node, self.node_uid, self.driver = node, node_uid, driver
        self.conditions, self.policy = conditions, policy
        self.all_nodes = all_nodes  # --broken-write-other-nodes
        self.inflight: set[str] = set()
        self.unheld_since: dict[str, float] = {}
        self.lock = threading.Lock()
        self.published: list[str] | None = None
        self.readied: set[str] = set()  # devices seen ready on this node (--broken-stale-ready reads it)

    def slice_base(self) -> dict[str, Any]:
        name = f"{self.driver.replace('.', '-')}-{self.node}"[:253]
        return {
            "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
            "kind": "ResourceSlice",
            "metadata": {
                "name": name,
                "labels": {"app.kubernetes.io/managed-by": MANAGER},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self.node_uid, "controller": True}
                ],
            },
            "spec": {"driver": self.driver, "nodeName": self.node, "pool": {"name": self.node}},
        }

    def entry(self, device: NodeDevice) -> dict[str, Any]:
        return {
            "name": device.name,
            "attributes": device_attributes(device.uuid, device.model, device.attributes),
            "bindingConditions": [self.conditions.ready],
            "bindingFailureConditions": [self.conditions.failed],
        }

    def own_slices(self) -> list[dict[str, Any]]:
        fields = f"spec.driver={self.driver},spec.nodeName={self.node}"
        return self.custom.list_cluster_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", field_selector=fields
        )["items"]

    def held(self, claims: list[dict[str, Any]], node: str) -> list[tuple[Held, dict[str, Any]]]:
        out = []
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                if result["driver"] != self.driver or result["pool"] != node or not result.get("bindingConditions"):
                    continue
                reported = {}
                for entry in claim["status"].get("devices") or []:
                    if (entry["driver"], entry["pool"], entry["device"]) == (self.driver, node, result["device"]):
                        reported = {c["type"]: c["status"] for c in entry.get("conditions") or []}
                meta = claim["metadata"]
                held = Held(
                    meta["namespace"],
                    meta["name"],
                    meta["uid"],
                    result["pool"],
                    result["device"],
                    _epoch(allocation.get("allocationTimestamp")),
                    reported,
                )
                out.append((held, claim))
        return out

    def sync(self) -> None:
        now = time.time()
        claims = self.custom.list_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, "resourceclaims")["items"]
        nodes = [self.node]
        if self.all_nodes:
            nodes += sorted(
                {r["pool"] for c in claims for r in _results(c) if r["driver"] == self.driver} - {self.node}
            )
        for node in nodes:
            devices = self.manager.devices(node)
            held = self.held(claims, node)
            with self.lock:
                inflight = set(self.inflight)
            self.readied |= {d.uuid for d in devices if d.state == "attached" and d.node == node}
            plan = decide(
                node,
                devices,
                [h for h, _ in held],
                self.conditions,
                inflight,
                self.unheld_since if node == self.node else {},
                now,
                self.policy,
                frozenset(self.readied),
            )
            if node == self.node:
                self.publish(plan.publish)  # hidden from the slice before a claim is told it failed
                self.unheld_since = plan.unheld_since
            claim_of = {h.uid: c for h, c in held}
            for h, reason, message in plan.report_failed:
                self.report(claim_of[h.uid], h, self.conditions.failed, reason, message)
            for device in plan.ready:
                self.start(device, node)
            for h in plan.report_ready:
                self.report(claim_of[h.uid], h, self.conditions.ready, "Ready", f"readied on node {node}")
            if node == self.node:
                for device in plan.unprepare:
                    problem = self.manager.unprepare(device)
                    log.info("unprepared %s (no claim holds it)%s", device.name, f": {problem}" if problem else "")

    def publish(self, devices: list[NodeDevice]) -> None:
        entries = [self.entry(d) for d in devices]
        generation = write_pool(
            self.custom, self.own_slices(), self.slice_base(), entries, lambda s: s["spec"].get("devices") or []
        )
        names = [d.name for d in devices]
        if generation is not None or self.published is None:
            log.info("node %s: published %d devices (generation %s)", self.node, len(names), generation)
        self.published = names

    def start(self, device: NodeDevice, node: str) -> None:
        with self.lock:
            if device.uuid in self.inflight:
                return
            self.inflight.add(device.uuid)
        log.info("readying %s on %s", device.name, node)

        def run() -> None:
            try:
                problem = self.manager.ready(device, node)
                log.info("readying %s on %s: %s", device.name, node, problem or "ready")
            finally:
                with self.lock:
                    self.inflight.discard(device.uuid)

        # a daemon thread: a readying that hangs (fault injection) must not hold the process at its exit
        threading.Thread(target=run, name=f"ready-{device.name}", daemon=True).start()

    def report(self, claim: dict[str, Any], held: Held, condition: str, reason: str, message: str) -> None:
        """Set one condition True for one device in the claim's status.devices (PUT: the other entries are kept)."""
        status = claim["status"]
        entries = [dict(e) for e in status.get("devices") or []]
        key = (self.driver, held.pool, held.device)
        entry = next((e for e in entries if (e["driver"], e["pool"], e["device"]) == key), None)
        if entry is None:
            entry = {"driver": self.driver, "pool": held.pool, "device": held.device, "conditions": []}
            entries.append(entry)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kept = [c for c in entry.get("conditions") or [] if c["type"] != condition]
        entry["conditions"] = [
            *kept,
            {"type": condition, "status": "True", "reason": reason, "message": message, "lastTransitionTime": stamp},
        ]
        body = {**claim, "status": {**status, "devices": entries}}
        try:
            self.custom.replace_namespaced_custom_object_status(
                RESOURCE_GROUP, RESOURCE_VERSION, held.namespace, "resourceclaims", held.claim, body
            )
        except ApiException as exc:
            log.warning(
                "claim %s/%s: %s %s: %s %s", held.namespace, held.claim, condition, reason, exc.status, exc.reason
            )
            return
        claim["status"] = body["status"]  # a second report in this round builds on this one
        log.info("claim %s/%s device %s: %s=True (%s)", held.namespace, held.claim, held.device, condition, reason)


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


@click.command(context_settings={"show_default": True})
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--node", required=True, help="the node this daemon serves")
@click.option("--device-manager", required=True, help="base URL of the device manager (fake-fabric-manager)")
@click.option("--driver", default="fpga.local.example.com", help="DRA driver name")
@click.option(
    "--condition-prefix", default=None, help="prefix of the condition types (default: the driver name; '' none)"
)
@click.option("--ready-condition", default="ready", help="binding condition type (after the prefix)")
@click.option("--failed-condition", default="prepare-failed", help="binding failure condition type (after the prefix)")
@click.option("--interval", type=click.FloatRange(min=0.05), default=0.5, help="seconds between rounds")
@click.option(
    "--quarantine-seconds", type=float, default=60.0, help="a device whose readying failed is hidden this long"
)
@click.option("--broken-ready-before-prepared", is_flag=True, hidden=True)
@click.option("--broken-no-failure-condition", is_flag=True, hidden=True)
@click.option("--broken-write-other-nodes", is_flag=True, hidden=True)
@click.option("--broken-never-ready", is_flag=True, hidden=True)
@click.option("--broken-stale-ready", is_flag=True, hidden=True)
@click.option("--broken-stale-failure", is_flag=True, hidden=True)
@click.option("--broken-report-before-unpublish", is_flag=True, hidden=True)
def main(
    kubeconfig: str,
    node: str,
    device_manager: str,
    driver: str,
    condition_prefix: str | None,
    ready_condition: str,
    failed_condition: str,
    interval: float,
    quarantine_seconds: float,
    broken_ready_before_prepared: bool,
    broken_no_failure_condition: bool,
    broken_write_other_nodes: bool,
    broken_never_ready: bool,
    broken_stale_ready: bool,
    broken_stale_failure: bool,
    broken_report_before_unpublish: bool,
) -> None:
    """Publish this node's devices with binding conditions; ready the allocated ones, then report them."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a request per round: not worth a line each
    prefix = driver if condition_prefix is None else condition_prefix
    name = (lambda t: f"{prefix}/{t}") if prefix else (lambda t: t)
    conditions = Conditions(name(ready_condition), name(failed_condition))
    policy = Policy(
        quarantine_s=quarantine_seconds,
        broken_ready_before_prepared=broken_ready_before_prepared,
        broken_no_failure_condition=broken_no_failure_condition,
        broken_never_ready=broken_never_ready,
        broken_stale_ready=broken_stale_ready,
        broken_stale_failure=broken_stale_failure,
        broken_report_before_unpublish=broken_report_before_unpublish,
    )
    broken = [
        flag
        for flag, on in zip(
            BROKEN_FLAGS,
            (
                broken_ready_before_prepared,
                broken_no_failure_condition,
                broken_write_other_nodes,
                broken_never_ready,
                broken_stale_ready,
                broken_stale_failure,
                broken_report_before_unpublish,
            ),
            strict=True,
        )
        if on
    ]
    if broken:
        log.warning("BROKEN ON PURPOSE (selftests only): %s", ", ".join(broken))
    api = config.new_client_from_config(config_file=kubeconfig)
    uid = client.CoreV1Api(api).read_node(node).metadata.uid
    readier = Readier(
        api, DeviceManager(device_manager), node, uid, driver, conditions, policy, broken_write_other_nodes
    )
    stop = stop_event(log, "removing the slice and stopping")
    log.info("node %s, driver %s, conditions %s / %s", node, driver, conditions.ready, conditions.failed)
    first = True
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                readier.sync()
                if first:
                    log.info("serving node %s; published %d devices", node, len(readier.published or []))
                    first = False
            except (ApiException, httpx.HTTPError) as exc:
                log.warning("round failed, trying again: %s", str(exc)[:300])
            stop.wait(max(0.0, interval - (time.monotonic() - started)))
    finally:
        try:
            for item in readier.own_slices():
                delete_slice(readier.custom, item["metadata"]["name"])
        except ApiException as exc:
            log.warning(
                "cannot remove the slice of node %s (%s %s): left to its owner, the Node", node, exc.status, exc.reason
            )


if __name__ == "__main__":
    main()
