"""kube-scheduler's PreBind waits on binding conditions as the run's record saw them, each with the outcomes its end
allows, in the units kube-scheduler's binding-conditions metrics count (cluster/metrics.py).

A PreBind that waits starts with the scheduler's own write reserving the claim for the pod (`status.reservedFor`,
written with the allocation) and ends, as the record sees it, with one of:
- the pod bound: `success`;
- the pod's reservation removed (Unreserve, after the PreBind returned an error): `failure` when a failure condition
  of one of its devices was True where the scheduler's poll reads it, in time for a poll before the timeout
  (kube-scheduler 1.37 and 1.38 read a claim's results in order and stop at the first device with binding conditions
  that has no status entry or a binding condition not True, and a pod's claims in order, stopping at the first claim
  not ready: a failure condition of a device after such a one is never read, so a multi-device claim with one attach
  hung and another device's failure reported ends by the binding timeout; where the claims' order decides, both),
  `timeout` when the removal came a binding
  timeout after the allocation's `allocationTimestamp` (less a second: the stamp is cut to whole seconds), both when
  the failure came within a poll of the timeout; otherwise `error`;
- the claim deleted while the pod waited: `error` (the scheduler cannot read it any more);
- the pod deleted while it waited: the PreBind goes on unseen, to `error` (claim deleted), `timeout`, or uncounted
  (the claim deallocated meanwhile: a claim without allocation is counted by neither metric). The same once the pod
  is being deleted (its deletionTimestamp seen), whatever the record sees next: the reservation removed as the pod
  goes (seen 2026-12-07: counted `timeout` by 1.37.2 where the record, taking it for an Unreserve, said `error`).
A reservation for a pod that is not the run's (not in the record) allows every outcome, or none.
A PreBind of a pod none of whose claims has a device with binding conditions does not wait: the metrics do not see it,
and neither does this view. Each wait carries, per driver, the allocated device results with binding conditions (the
counter's unit) and all allocated results (the histogram's), of every claim of the pod as of its end.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.metrics import STATUSES
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.observe.recorder import Record
from conformance.observe.slices import allocation_results, device_conditions

UNCOUNTED = ""  # an outcome the metrics may not count at all
POD_GONE = frozenset({"error", "timeout", UNCOUNTED})  # a wait whose pod was deleted: its PreBind ends unseen
# allocationTimestamp is written with whole seconds: a timeout may come up to this much before stamp + timeout.
STAMP_SLACK_S = 1.0


@dataclass
class Wait:
    pod: str  # namespace/name
    uid: str
    start_revision: int
    start_at: float
    known_pod: bool  # the pod is one of the run's (its records are in the record)
    claims: set[str] = field(default_factory=set)  # claim uids reserving the pod now
    every_claim: set[str] = field(default_factory=set)
    devices: dict[str, int] = field(default_factory=dict)  # driver -> results with binding conditions
    results: dict[str, int] = field(default_factory=dict)  # driver -> allocated results
    failure_at: float | None = None  # first failure condition True seen where the scheduler's poll reads it
    failure_maybe_at: float | None = None  # ... seen where the poll reads it or not, by the pod's claims' order
    failure_seen_at: float | None = None  # a failure condition True on any device, read by the poll or not
    ready_at: float | None = None  # when every binding condition of its claims was last seen turning True
    timeout_at: float | None = None  # allocationTimestamp + binding timeout, the earliest of its claims
    end: str = "open"  # bound, unreserved, claim deleted, pod deleted, open (still waiting when the record ends)
    end_revision: int | None = None
    end_at: float | None = None
    possible: frozenset[str] = frozenset()  # the metric statuses its end allows (UNCOUNTED: maybe none)

    @property
    def certain(self) -> str | None:
        """The one status the metrics must count it under, or None where its end allows several."""
        return next(iter(self.possible)) if len(self.possible) == 1 else None


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _reserved(obj: dict[str, Any]) -> dict[str, str]:
    """pod uid -> name of every pod the claim is reserved for."""
    entries = (obj.get("status") or {}).get("reservedFor") or []
    return {e["uid"]: e.get("name", "") for e in entries if e.get("resource", "pods") == "pods" and e.get("uid")}


FAILED, WAITING, READY = "failed", "waiting", "ready"


def _scan(claim: dict[str, Any]) -> str:
    """What kube-scheduler's PreBind poll reads of one claim (isClaimReadyForBinding): its results in order, each with
    binding conditions read until the first one with a failure condition True (failed) or without a status entry or
    with a binding condition not True (waiting: the results after it are not read)."""
    for r in allocation_results(claim):
        conditions = r.get("bindingConditions") or []
        if not conditions:
            continue
        states = device_conditions(claim, r)
        if any(states.get(t) == "True" for t in r.get("bindingFailureConditions") or []):
            return FAILED
        if not all(states.get(t) == "True" for t in conditions):
            return WAITING
    return READY if allocation_results(claim) else WAITING


def _stamp(obj: dict[str, Any]) -> float | None:
    text = ((obj.get("status") or {}).get("allocation") or {}).get("allocationTimestamp")
    if not text:
        return None
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


class _Walk:
    """The record's claims and pods in etcd order, and the waits they open and close."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.claims: dict[str, dict[str, Any]] = {}  # claim uid -> as last recorded
        self.claim_of_pod: dict[str, set[str]] = {}
        self.open: dict[str, Wait] = {}  # pod uid -> its open wait
        self.bound: set[str] = set()
        self.pods: dict[str, str] = {}  # pod uid -> namespace/name, for the run's pods
        self.deleting: set[str] = set()  # pod uids whose deletionTimestamp the record has shown
        self.waits: list[Wait] = []
        self.now = 0.0  # when the record being walked arrived

    def count(self, wait: Wait) -> None:
        """The wait's devices and results as of now; where to look for its conditions' state."""
        devices: dict[str, int] = {}
        results: dict[str, int] = {}
        wanted, ready, stamps, scans = 0, True, [], []
        for uid in wait.every_claim:
            claim = self.claims.get(uid)
            if claim is None:
                continue
            gated = 0
            for r in allocation_results(claim):
                results[r["driver"]] = results.get(r["driver"], 0) + 1
                conditions = r.get("bindingConditions") or []
                if not conditions:
                    continue
                gated += 1
                devices[r["driver"]] = devices.get(r["driver"], 0) + 1
                states = device_conditions(claim, r)
                ready = ready and all(states.get(t) == "True" for t in conditions)
                if any(states.get(t) == "True" for t in r.get("bindingFailureConditions") or []):
                    wait.failure_seen_at = wait.failure_seen_at or self.now
            scans.append(_scan(claim))
            wanted += gated
            if gated and (stamp := _stamp(claim)) is not None:
                stamps.append(stamp + self.timeout_s)
        if FAILED in scans and WAITING not in scans:  # every claim read up to its failure: the poll sees it
            wait.failure_at = wait.failure_at or self.now
        elif FAILED in scans:  # a claim the poll may stop at first, or not: the pod's order decides
            wait.failure_maybe_at = wait.failure_maybe_at or self.now
        if results:  # a claim cleared in the meantime keeps what it had: the scheduler's copy is older
            wait.devices, wait.results = devices, results
        if stamps:
            wait.timeout_at = min(stamps)
        if wanted and ready and wait.ready_at is None:
            wait.ready_at = self.now
        elif not ready:
            wait.ready_at = None

    def close(self, wait: Wait, how: str, record: Record, possible: Iterable[str]) -> None:
        if wait.uid in self.deleting and how not in ("bound", "pod deleted"):  # the pod was going: its end is unseen
            how, possible = f"{how} (pod being deleted)", POD_GONE
        wait.end, wait.end_revision, wait.end_at = how, record.revision, record.at
        # A pod that is not the run's (another user's, or a name an API test wrote into reservedFor by hand): the
        # record cannot tell whether kube-scheduler waited for it at all.
        wait.possible = frozenset(possible) if wait.known_pod else frozenset({*STATUSES, UNCOUNTED})
        self.open.pop(wait.uid, None)

    def unreserved(self, wait: Wait, record: Record) -> None:
        """The outcomes a PreBind that ended with an error allows, from what the record saw while it waited."""
        at = record.at
        timed_out = wait.timeout_at is not None and at >= wait.timeout_at - STAMP_SLACK_S
        failed = wait.failure_at is not None
        if failed and timed_out and wait.failure_at >= wait.timeout_at - PREBIND_POLL_S - STAMP_SLACK_S:
            possible = {"failure", "timeout"}  # the failure came within a poll of the timeout: either poll won
        elif failed:
            possible = {"failure"}
        elif timed_out:
            possible = {"timeout"}
        else:
            possible = {"error"}
        if not failed and wait.failure_maybe_at is not None:
            possible.add("failure")
        self.close(wait, "unreserved", record, possible)

    def claim(self, record: Record) -> None:
        uid = _uid(record.obj) or f"{record.namespace}/{record.name}"
        before = _reserved(self.claims.get(uid, {}))
        deleted = record.type == "DELETED"
        self.claims[uid] = record.obj
        now = {} if deleted else _reserved(record.obj)
        for pod_uid, name in now.items():
            if pod_uid in before or pod_uid in self.bound:
                continue
            wait = self.open.get(pod_uid)
            if wait is None:
                pod = self.pods.get(pod_uid, f"{record.namespace}/{name}")
                wait = Wait(pod, pod_uid, record.revision or 0, record.at, pod_uid in self.pods)
                self.open[pod_uid] = wait
                self.waits.append(wait)
            wait.claims.add(uid)
            wait.every_claim.add(uid)
        for pod_uid in {*before, *now}:
            if (wait := self.open.get(pod_uid)) is not None and uid in wait.every_claim:
                self.count(wait)
        for pod_uid in before:
            wait = self.open.get(pod_uid)
            if wait is None or pod_uid in now:
                continue
            wait.claims.discard(uid)
            if deleted:
                self.close(wait, "claim deleted", record, {"error", UNCOUNTED})
            elif not wait.claims:
                self.unreserved(wait, record)

    def pod(self, record: Record) -> None:
        uid = _uid(record.obj)
        self.pods[uid] = f"{record.namespace}/{record.name}"
        wait = self.open.get(uid)
        if record.type != "DELETED" and (record.obj.get("spec") or {}).get("nodeName"):
            self.bound.add(uid)
            if wait is not None:
                self.count(wait)
                self.close(wait, "bound", record, {"success"})
        elif record.type == "DELETED" and wait is not None:
            self.close(wait, "pod deleted", record, POD_GONE)
        if record.type != "DELETED" and (record.obj.get("metadata") or {}).get("deletionTimestamp"):
            self.deleting.add(uid)


def prebind_waits(records: Iterable[Record], timeout_s: float) -> list[Wait]:
    """Every PreBind wait on binding conditions the record shows (pods with such a device in some claim), in order."""
    walk = _Walk(timeout_s)
    ordered = sorted((r for r in records if r.kind in ("claim", "pod")), key=lambda r: (r.revision or 0, r.seq))
    # A pod's records first make it known (a claim may name a pod the record saw created at a later revision).
    for r in ordered:
        if r.kind == "pod":
            walk.pods[_uid(r.obj)] = f"{r.namespace}/{r.name}"
    for r in ordered:
        walk.now = r.at
        if r.kind == "claim":
            walk.claim(r)
        else:
            walk.pod(r)
    for wait in walk.waits:
        if wait.end == "open":  # still waiting when the record ends: the metrics may count it by any status, or not
            wait.possible = frozenset({*STATUSES, UNCOUNTED})
    return [w for w in walk.waits if w.devices]


@dataclass(frozen=True)
class Bounds:
    """Per (driver, status): what the metrics must have counted at least and may have counted at most."""

    low: dict[tuple[str, str], int]
    high: dict[tuple[str, str], int]


def bounds(waits: Iterable[Wait], unit: str = "devices") -> Bounds:
    """`unit` devices: the counter's (results with binding conditions); results: the histogram's observations."""
    low: dict[tuple[str, str], int] = {}
    high: dict[tuple[str, str], int] = {}
    for wait in waits:
        per_driver: dict[str, int] = getattr(wait, unit)
        for driver, n in per_driver.items():
            for status in wait.possible - {UNCOUNTED}:
                high[(driver, status)] = high.get((driver, status), 0) + n
            if wait.certain not in (None, UNCOUNTED):
                low[(driver, wait.certain)] = low.get((driver, wait.certain), 0) + n
    return Bounds(low, high)


def latencies(waits: Iterable[Wait]) -> dict[str, list[float]]:
    """Seconds, per successful wait: from the reservation to the binding (what the SLI measures, as the watch
    delivered both writes) and from the last binding condition turning True to the binding."""
    out: dict[str, list[float]] = {"reservation_to_bind": [], "conditions_to_bind": []}
    for wait in waits:
        if wait.end != "bound" or wait.end_at is None:
            continue
        out["reservation_to_bind"].append(round(wait.end_at - wait.start_at, 3))
        if wait.ready_at is not None:
            out["conditions_to_bind"].append(round(wait.end_at - wait.ready_at, 3))
    return out
