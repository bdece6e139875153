"""Another DRA driver in the cluster, live while coexistence is judged (IMP-17).

A real cluster runs several DRA drivers, and a stack that reconciles every claim with binding conditions, whatever
its driver, breaks there (CoHDI's scaler aborted its whole reconcile on another driver's claim). So through the
coexistence phase (suite/phases.py: from the implementation's readiness until the coexistence scenario and the
cluster scenarios have ended) the suite plays one more driver: its DeviceClass, its ResourceSlice (devices with
bindsToNode and binding conditions, allNodes) and claims with binding conditions in every state the KEP gives them:
- pending: its request selects no device, it is never allocated;
- waiting: allocated, its conditions never written, so it times out every bindingTimeout and is allocated again
  (allocated-and-waiting and timed-out, in turn);
- failed: the suite writes its failure condition True each time it is allocated (the scheduler then deallocates it).
Each claim selects a device of its own (attribute `role`), so they never race for one (kube-scheduler 1.37.2 can
allocate a device twice after a timeout when claims race: ../shared/kep-5007.md).

What the implementation must not do is judged on the run-wide record, on evidence that does not depend on how it
writes: the other driver's slice and class keep the resourceVersion the suite created them with; its claims'
status.devices only ever hold the condition the suite wrote (none on the pending and waiting claims); no claim is
deleted before the suite deletes it; and no writer but the suite and the control plane (kube-*) appears in their
managedFields. Those writes are read once more when the phase ends (`finish`), before its objects are deleted: the
foreign-free phase that follows has no other driver's claim live.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import RESOURCE_API, pod_with_claim_template, unique_driver
from conformance.cluster.objects import ObjectTracker
from conformance.observe.recorder import Recorder
from conformance.observe.views import History, device_conditions
from conformance.suite.cluster.owned import OwnedDriver
from conformance.suite.context import ClusterContext
from conformance.suite.record import Scenario

STATES = ("pending", "waiting", "timed-out", "failed")
WRITER_PERIOD_S = 0.5
TIMEOUT_TEXT = "binding timeout"
SUITE_REASON = "ConformanceOtherDriver"
OTHER_POOL = "other-driver-fabric"  # distinctive: the implementation's log lines that name it are recognised
CONTROL_PLANE_PREFIX = "kube-"  # kube-scheduler, kube-controller-manager: they write claims of every driver
RECORD = Scenario(
    "other-drivers",
    "another driver's class, slice and claims in every binding state, live through the coexistence phase",
    ("IMP-17",),
    lambda _ctx: None,
    __name__,
    implementation=False,
)


@dataclass
class OtherDrivers:
    """The other driver's objects (see the module), created by start() and removed by stop()."""

    ctx: ClusterContext
    driver: str = field(default_factory=lambda: unique_driver("other"))
    namespace: str = ""
    started: float = 0.0
    unavailable: str = ""  # why nothing could be created (the coexistence scenario then says so)
    created: dict[str, str] = field(default_factory=dict)  # "DeviceClass x" / "ResourceSlice x" -> resourceVersion
    managers: set[str] = field(default_factory=set)  # the suite's own field managers, as its writes show them
    writes: list[tuple[float, str]] = field(default_factory=list)  # (time, claim) of each failure condition written
    pods: dict[str, str] = field(default_factory=dict)  # state -> pod
    final_writes: list[str] | None = None  # the foreign writes read when the phase ended (finish), before deleting
    ended: float | None = None  # when its objects were deleted (the coexistence phase's end)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def failed_type(self) -> str:
        return f"{self.driver}/failed"

    @property
    def ready_type(self) -> str:
        return f"{self.driver}/ready"

    def start(self) -> OtherDrivers:
        self.started = time.time()
        try:
            self._create()
        except (AssertionError, ApiException) as exc:
            self.unavailable = f"the other driver's objects could not be created: {str(exc).splitlines()[0]}"
            return self
        self._thread = threading.Thread(target=self._write_failures, name="other-driver-writer", daemon=True)
        self._thread.start()
        return self

    def _create(self) -> None:
        ctx = self.ctx
        self.namespace = ctx.namespace("other-driver")
        cls = ctx.objects.create(
            {
                "apiVersion": RESOURCE_API,
                "kind": "DeviceClass",
                "metadata": {"name": f"other-{ctx.objects.run_id}"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]},
            }
        )
        self._own(f"DeviceClass {cls.metadata.name}", cls)
        devices = [
            {
                "name": f"dev-{state}",
                "attributes": {"role": {"string": state}},
                "bindsToNode": True,
                "bindingConditions": [self.ready_type],
                "bindingFailureConditions": [self.failed_type],
            }
            for state in ("waiting", "failed")
        ]
        slice_ = ctx.objects.create(
            {
                "apiVersion": RESOURCE_API,
                "kind": "ResourceSlice",
                "metadata": {"name": f"other-{ctx.objects.run_id}"},
                "spec": {
                    "driver": self.driver,
                    "pool": {"name": OTHER_POOL, "generation": 1, "resourceSliceCount": 1},
                    "allNodes": True,
                    "devices": devices,
                },
            }
        )
        self._own(f"ResourceSlice {slice_.metadata.name}", slice_)
        for state, role in (("pending", "none"), ("waiting", "waiting"), ("failed", "failed")):
            template = _template(state, cls.metadata.name, self.driver, role)
            self._own(None, ctx.objects.create(template, self.namespace))
            pod = ctx.objects.create(pod_with_claim_template(state, state), self.namespace)
            self._own(None, pod)
            self.pods[state] = state

    def finish(self, cluster: Cluster) -> list[str]:
        """The end of the coexistence phase: the writes to its objects read one last time (with `cluster`, the
        caller's client), then the objects deleted; what could not be deleted."""
        if self.final_writes is None and not self.unavailable:
            self._stop.set()  # no failure condition written meanwhile: what is read is the implementation's doing
            if self._thread is not None:
                self._thread.join(timeout=10)
            self.final_writes = self.foreign_writes(cluster)
        return self.stop()

    def stop(self) -> list[str]:
        """Stop the writer and delete every object (newest first); what could not be deleted. Once only."""
        if self.ended is not None:
            return []
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        failures = self.ctx.objects.cleanup()
        self.ctx.cluster.close()
        self.ended = time.time()
        return failures

    def _own(self, key: str | None, obj: Any) -> None:
        meta = obj.to_dict()["metadata"]
        self.managers |= {m["manager"] for m in meta.get("managedFields") or [] if m.get("manager")}
        if key:
            self.created[key] = meta["resourceVersion"]

    # -- the suite's condition writer (the failed claim) ---------------------------------------------------------
    def _write_failures(self) -> None:
        history = self.history()
        while not self._stop.wait(WRITER_PERIOD_S):
            for name, claim in history.latest("claim").items():
                if not name.startswith("failed-"):
                    continue
                results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
                written = any(
                    c["type"] == self.failed_type and c["status"] == "True"
                    for r in results
                    for c in device_conditions(claim, r)
                )
                if results and not written:
                    try:
                        self._fail(name, results)
                    except ApiException as exc:  # deallocated or changed meanwhile: the next round sees it
                        if exc.status not in (404, 409, 422):
                            raise

    def _fail(self, name: str, results: list[dict[str, Any]]) -> None:
        """The failure condition True on every device of the claim, written as the suite's own drivers write
        conditions (OwnedDriver.set_conditions: other entries and conditions kept, conflicts retried)."""
        writer = OwnedDriver(self.ctx, self.namespace, name=self.driver)
        devices = [(r["pool"], r["device"]) for r in results]
        message = "written by the conformance suite playing another driver's controller"
        writer.set_conditions(name, devices, [self.failed_type], reason=SUITE_REASON, message=message)
        self.writes.append((time.time(), name))

    # -- what happened -----------------------------------------------------------------------------------------
    def history(self) -> History:
        return History(self.ctx.record, self.namespace)

    def states_seen(self) -> dict[str, float]:
        """State -> when the record first showed one of the claims in it."""
        seen: dict[str, float] = {}
        history = self.history()
        for e in history.events("claim"):
            if e.deleted:
                continue
            results = ((e.obj.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
            conditions = [c for r in results for c in device_conditions(e.obj, r)]
            if e.name.startswith("pending-") and not results:
                seen.setdefault("pending", e.at)
            if results and not any(c["status"] == "True" for c in conditions):
                seen.setdefault("waiting", e.at)
            if any(c["type"] == self.failed_type and c["status"] == "True" for c in conditions):
                seen.setdefault("failed", e.at)
        for ev in history.k8s_events():
            if TIMEOUT_TEXT in (ev.get("message") or "") and ev["object"]["name"] == self.pods.get("waiting"):
                seen.setdefault("timed-out", time.time())
        for c in _pod_conditions(history, self.pods.get("waiting", "")):
            if TIMEOUT_TEXT in (c.get("message") or ""):
                seen.setdefault("timed-out", time.time())
        return seen

    def live_claims(self) -> dict[str, str]:
        """Claim -> its state now (pending, waiting, failed, or deallocated between two rounds)."""
        out = {}
        for name, claim in self.history().latest("claim").items():
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
            conditions = [c for r in results for c in device_conditions(claim, r)]
            if not results:
                out[name] = "pending" if name.startswith("pending-") else "deallocated (between rounds)"
            elif any(c["status"] == "True" and c["type"] == self.failed_type for c in conditions):
                out[name] = "failed"
            else:
                out[name] = "allocated, waiting"
        return out

    def wait_states(self, timeout: float) -> dict[str, float]:
        """Wait (at most `timeout`) until each state was seen; return what was seen."""
        deadline = time.time() + timeout
        seen = self.states_seen()
        while set(STATES) - set(seen) and time.time() < deadline and not self._stop.is_set():
            self._stop.wait(0.5)
            seen = self.states_seen()
        return seen

    def foreign_writes(self, cluster: Cluster) -> list[str]:
        """Every write to the other driver's objects not made by the suite or the control plane (see the module),
        read with `cluster` (the caller's client) and from the run-wide record."""
        found: list[str] = []
        for key, version in sorted(self.created.items()):
            kind, name = key.split(" ", 1)
            try:
                meta = cluster.kind(RESOURCE_API, kind).get(name=name).to_dict()["metadata"]
            except ApiException as exc:
                if exc.status != 404:
                    raise
                found.append(f"{key}: deleted while the other driver was live (created at resourceVersion {version})")
                continue
            if meta["resourceVersion"] != version:
                writers = sorted({m.get("manager") for m in meta.get("managedFields") or []} - self.managers)
                found.append(
                    f"{key}: changed (resourceVersion {version} as the suite created it, now "
                    f"{meta['resourceVersion']}; field managers not the suite's: {writers})"
                )
        slice_name = next((k.split(" ", 1)[1] for k in self.created if k.startswith("ResourceSlice ")), None)
        for r in self.ctx.record.select(("slice",)):
            if (
                r.name == slice_name
                and r.type not in ("DELETED",)
                and f"{r.revision}" != self.created.get(f"ResourceSlice {slice_name}")
            ):
                found.append(f"ResourceSlice {slice_name}: a version at revision {r.revision} the suite did not write")
        for e in self.history().events("claim"):
            where = f"ResourceClaim {self.namespace}/{e.name} at revision {e.revision}"
            if e.deleted:
                found.append(f"{where}: deleted while the other driver was live")
                continue
            for entry in (e.obj.get("status") or {}).get("devices") or []:
                foreign = [
                    f"{c['type']}={c['status']} ({c.get('reason')})"
                    for c in entry.get("conditions") or []
                    if not (
                        e.name.startswith("failed-")
                        and c["type"] == self.failed_type
                        and c.get("reason") == SUITE_REASON
                    )
                ]
                extra = [k for k in ("data", "networkData") if entry.get(k)]
                if foreign or extra:
                    found.append(
                        f"{where}: status.devices {entry['pool']}/{entry['device']} holds what the suite never wrote: "
                        f"{foreign + extra}"
                    )
            writers = {m.get("manager") for m in e.obj["metadata"].get("managedFields") or []}
            strangers = sorted(
                w for w in writers if w and w not in self.managers and not w.startswith(CONTROL_PLANE_PREFIX)
            )
            if strangers:
                found.append(
                    f"{where}: written by field managers other than the suite and the control plane: {strangers}"
                )
        return list(dict.fromkeys(found))


def _template(state: str, device_class: str, driver: str, role: str) -> dict[str, Any]:
    selector = f'device.attributes["{driver}"].role == "{role}"'
    request = {
        "name": "dev",
        "exactly": {"deviceClassName": device_class, "selectors": [{"cel": {"expression": selector}}]},
    }
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": state},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def _pod_conditions(history: History, pod: str) -> list[dict[str, Any]]:
    return [
        c for e in history.events("pod") if e.name == pod for c in (e.obj.get("status") or {}).get("conditions") or []
    ]


def other_drivers(cluster: Cluster, record: Recorder, run_id: str, say: Callable[[str], None]) -> OtherDrivers:
    """The other driver for one run: its own API client and object tracker, started."""
    ctx = ClusterContext(
        scenario=RECORD, cluster=cluster, objects=ObjectTracker(cluster, run_id), say=say, record=record
    )
    return OtherDrivers(ctx).start()
