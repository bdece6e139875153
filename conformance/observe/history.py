"""Every change of a scenario's claims and pods, in etcd order: the allocations a claim went through, the
conditions each one carried, and the moment a pod was bound.

Built on watches, not samples: a reallocation that lasts a few milliseconds is still seen. Events of both
streams carry the object's resourceVersion (the etcd revision of the write), so a pod's binding is ordered
against its claim's changes exactly (see conformance.observe.watchcache).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from conformance.cluster.client import Cluster
from conformance.cluster.objects import RUN_LABEL
from conformance.cluster.waits import wait_for
from conformance.observe.invariants import binding_state
from conformance.observe.watchcache import WatchCache

T = TypeVar("T")
# How long a scenario waits for one scheduler step: a scheduling cycle, the scheduler's 5 s PreBind poll and its
# retry backoff, on a slow shared machine.
SCHEDULE_S = 30.0


@dataclass(frozen=True)
class Event:
    revision: int
    at: float  # time.time() when the watch delivered it
    kind: str  # "claim" or "pod"
    name: str
    deleted: bool
    obj: dict[str, Any]


@dataclass
class Allocation:
    """One allocation of a claim, from the write that set it to the write that cleared it."""

    revision: int
    at: float
    allocation: dict[str, Any]
    failures: list[dict[str, Any]] = field(default_factory=list)  # failure conditions seen True, with the device
    cleared_revision: int | None = None
    cleared_at: float | None = None
    rewritten: bool = False  # replaced by another allocation with no clearing in between (edited in place)
    # (pool, device, condition type) -> (revision, delivery time) of the first event that showed it True
    true_at: dict[tuple[str, str, str], tuple[int, float]] = field(default_factory=dict)

    @property
    def results(self) -> list[dict[str, Any]]:
        return list(self.allocation["devices"]["results"])

    @property
    def devices(self) -> list[tuple[str, str]]:
        return [(r["pool"], r["device"]) for r in self.results]

    @property
    def node(self) -> str | None:
        """The node a bindsToNode allocation pins (matchFields metadata.name In [node]), else None."""
        terms = (self.allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
        fields = [f for t in terms for f in t.get("matchFields") or []]
        names = {v for f in fields if f["key"] == "metadata.name" and f["operator"] == "In" for v in f["values"]}
        return next(iter(names)) if len(terms) == 1 and len(names) == 1 else None


def device_conditions(claim: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    """The conditions the claim's status.devices[] reports for one allocated device."""
    for entry in (claim.get("status") or {}).get("devices") or []:
        if (entry["driver"], entry["pool"], entry["device"]) == (result["driver"], result["pool"], result["device"]):
            return list(entry.get("conditions") or [])
    return []


@dataclass(frozen=True)
class Binding:
    revision: int
    at: float
    node: str
    claim_state: str  # binding_state of the claim as of the binding's revision


class History:
    """Watches the claims and the run's pods of one namespace from creation on (use as a context manager)."""

    def __init__(self, cluster: Cluster, namespace: str, run_id: str) -> None:
        self.namespace = namespace
        self._events: list[Event] = []
        self._seen: set[tuple[str, str, int]] = set()
        self._lock = threading.Lock()
        self._cluster = Cluster(cluster.info, f"{cluster.user_agent}/history")  # the watch threads' own client
        api = self._cluster.api
        self._caches = [
            WatchCache(api, "resourceclaims", "resource.k8s.io", "v1", on_event=self._on("claim")),
            WatchCache(api, "pods", label_selector=f"{RUN_LABEL}={run_id}", on_event=self._on("pod")),
        ]

    def _on(self, kind: str) -> Callable[[str, dict[str, Any]], None]:
        def record(event: str, obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            if meta.get("namespace") != self.namespace:
                return
            key = (kind, meta["name"], int(meta["resourceVersion"]))
            with self._lock:
                if key in self._seen and event != "DELETED":
                    return  # a relist repeats what the watch delivered
                self._seen.add(key)
                self._events.append(Event(key[2], time.time(), kind, meta["name"], event == "DELETED", obj))

        return record

    def __enter__(self) -> History:
        for cache in self._caches:
            cache.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        # Not waiting for the threads: a quiet watch returns only at its next event, and what comes now is unused.
        for cache in self._caches:
            cache.stop(wait=0)

    def events(self, kind: str | None = None) -> list[Event]:
        with self._lock:
            return sorted((e for e in self._events if kind in (None, e.kind)), key=lambda e: e.revision)

    def allocations(self) -> list[Allocation]:
        """The allocations of the namespace's (single) claim, in order, with the failures each one showed."""
        out: list[Allocation] = []
        for e in self.events("claim"):
            current = out[-1] if out and out[-1].cleared_revision is None else None
            allocation = None if e.deleted else (e.obj.get("status") or {}).get("allocation")
            if current and (allocation is None or _identity(allocation) != _identity(current.allocation)):
                current.cleared_revision, current.cleared_at = e.revision, e.at
                current.rewritten = allocation is not None
                current = None
            if allocation and current is None:
                current = Allocation(e.revision, e.at, allocation)
                out.append(current)
            if current is not None:
                for r in current.results:
                    for c in device_conditions(e.obj, r):
                        if c["status"] == "True":
                            current.true_at.setdefault((r["pool"], r["device"], c["type"]), (e.revision, e.at))
                        failing = c["type"] in (r.get("bindingFailureConditions") or []) and c["status"] == "True"
                        if failing and c["type"] not in {f["type"] for f in current.failures}:
                            current.failures.append({**c, "device": (r["pool"], r["device"]), "revision": e.revision})
        return out

    def binding(self) -> Binding | None:
        """The first event that shows a pod bound, with the claim's binding state as of that revision."""
        bound = self.bindings()
        return min(bound.values(), key=lambda b: b.revision) if bound else None

    def bindings(self) -> dict[str, Binding]:
        """Per pod, the first event that shows it bound, with the claim's binding state as of that revision."""
        claims = self.events("claim")
        out: dict[str, Binding] = {}
        for e in self.events("pod"):
            node = (e.obj.get("spec") or {}).get("nodeName")
            if node and not e.deleted and e.name not in out:
                before = [c for c in claims if c.revision <= e.revision]
                state = "deleted" if not before or before[-1].deleted else binding_state(before[-1].obj)
                out[e.name] = Binding(e.revision, e.at, node, state)
        return out

    def pod_conditions(self) -> list[dict[str, Any]]:
        """Every distinct pod condition (type, status, reason, message) the pod stream showed, in order."""
        seen: list[dict[str, Any]] = []
        for e in self.events("pod"):
            for c in (e.obj.get("status") or {}).get("conditions") or []:
                entry = {k: c.get(k) for k in ("type", "status", "reason", "message")}
                if entry not in seen:
                    seen.append(entry)
        return seen

    def wait(self, done: Callable[[History], T | None], *, timeout: float, expected: str) -> T:
        """Wait until `done(self)` returns something truthy (not None, False or an empty list) and return it."""
        return wait_for(
            lambda: done(self),
            bool,
            timeout=timeout,
            expected=f"{expected} (namespace {self.namespace})",
            describe=lambda _found: self.describe(),
            max_interval=0.5,
        )

    def describe(self) -> str:
        lines = []
        for a in self.allocations():
            cleared = f", cleared at revision {a.cleared_revision}" if a.cleared_revision else ""
            failures = [f"{f['type']}={f['status']} ({f.get('reason')})" for f in a.failures]
            lines.append(f"allocation at revision {a.revision}: {a.devices} on {a.node}{cleared}; failures {failures}")
        binding = self.binding()
        lines.append(f"pod bound: {binding}" if binding else "pod not bound")
        pods = self.events("pod")
        if pods:
            lines.append(f"last pod status: {pods[-1].obj.get('status')}")
        claims = self.events("claim")
        if claims:
            lines.append(f"last claim status: {claims[-1].obj.get('status')}")
        return "\n  ".join(lines)


def _identity(allocation: dict[str, Any]) -> tuple[Any, ...]:
    """What makes an allocation a new one: its timestamp and its devices (conditions change in status.devices)."""
    results = allocation.get("devices", {}).get("results") or []
    return allocation.get("allocationTimestamp"), tuple((r["pool"], r["device"]) for r in results)
