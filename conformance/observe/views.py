"""Views of the run-wide record (recorder.py) for one namespace: the allocations a claim went through, the
conditions each one carried, and the moment a pod was bound, in etcd order.

The record is built on watches, not samples: a reallocation that lasts a few milliseconds is still seen. Claims
and pods carry their resourceVersion (the etcd revision of the write), so a pod's binding is ordered against its
claim's changes exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.observe.recorder import Recorder
from conformance.observe.slices import allocation_results
from conformance.observe.slices import device_conditions as condition_states

T = TypeVar("T")
# How long a scenario waits for one scheduler step: a scheduling cycle, the scheduler's 5 s PreBind poll and its
# retry backoff, on a slow shared machine.
SCHEDULE_S = 30.0
# The pod and the claim streams are two watches: under load a binding can be delivered before claim changes written at
# earlier revisions (seen on reference-counted in a soak: "bound r2027, claim none", the reallocation at r2023-2026 not
# yet delivered). What a claim stood at then is read once the claim stream has delivered up to the binding's revision,
# or this long after the binding was delivered (then the reader says so: nothing is excused).
CATCH_UP_S = 10.0


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


def binding_state(claim: dict[str, Any]) -> str:
    """'none' (not allocated or no conditions), 'pending', 'ready' (all True) or 'failed' (a failure True)."""
    state = "none"
    for r in allocation_results(claim):
        conds = condition_states(claim, r)
        if any(conds.get(t) == "True" for t in r.get("bindingFailureConditions") or []):
            return "failed"
        wanted = r.get("bindingConditions") or []
        if wanted:
            state = "pending" if state == "pending" or any(conds.get(t) != "True" for t in wanted) else "ready"
    return state


@dataclass(frozen=True)
class Binding:
    revision: int
    at: float
    node: str
    claim_state: str  # binding_state of the claim as of the binding's revision


class History:
    """One namespace's claims and the run's pods in it, as the run-wide record holds them (a view: it watches
    nothing itself). Usable as a context manager, so a scenario reads as the window it observes."""

    def __init__(self, record: Recorder, namespace: str) -> None:
        self.namespace = namespace
        self._record = record

    def __enter__(self) -> History:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def events(self, kind: str | None = None) -> list[Event]:
        kinds = (kind,) if kind else ("claim", "pod")
        found = self._record.select(kinds, namespace=self.namespace)
        return sorted(
            (Event(r.revision or 0, r.at, r.kind, r.name, r.type == "DELETED", r.obj) for r in found),
            key=lambda e: e.revision,
        )

    def latest(self, kind: str) -> dict[str, dict[str, Any]]:
        """name -> the object as last recorded, for objects not deleted."""
        out: dict[str, dict[str, Any]] = {}
        for e in self.events(kind):
            if e.deleted:
                out.pop(e.name, None)
            else:
                out[e.name] = e.obj
        return out

    def allocations(self, claim: str | None = None) -> list[Allocation]:
        """The allocations of one claim (default: the namespace's single claim), in order, with their failures."""
        out: list[Allocation] = []
        for e in self.events("claim"):
            if claim is not None and e.name != claim:
                continue
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

    def k8s_events(self) -> list[dict[str, Any]]:
        """The namespace's Events (summaries: reason, message, type, count, object), each as last recorded."""
        latest: dict[str, dict[str, Any]] = {}
        for r in self._record.select(("event",), namespace=self.namespace):
            latest[r.name] = r.obj
        return list(latest.values())

    def in_place_rewrites(self) -> list[str]:
        """Allocations replaced by another with no clearing in between (API-6 forbids it, IMP-7 avoids it)."""
        claims = {e.name for e in self.events("claim")}
        return [
            f"{claim}: {a.devices} (revision {a.revision}) rewritten at revision {a.cleared_revision}"
            for claim in sorted(claims)
            for a in self.allocations(claim)
            if a.rewritten
        ]

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

    def catch_up(self, binding: Binding, what: str) -> str | None:
        """Wait until the claim stream has delivered every change up to `binding`'s revision (the pod stream delivered
        the binding): None then, else the wait's failure message. A claim record standing at that revision is not
        enough: a clearing written before it may still be in flight. The deadline counts from the binding's delivery,
        so a cluster that writes no claim after a binding costs one wait, not one per reader."""

        def caught_up(delivered: int) -> bool:
            return delivered >= binding.revision or claims_current(self._record, self.namespace)

        try:
            wait_for(
                lambda: self._record.high_water("claim"),
                caught_up,
                timeout=max(0.0, binding.at + CATCH_UP_S - time.time()),
                expected=f"the claim stream to deliver revision {binding.revision} within {CATCH_UP_S:g}s of {what} "
                f"(namespace {self.namespace})",
                describe=lambda delivered: (
                    f"the claim stream had delivered up to revision {delivered}\n  " + self.describe()
                ),
                max_interval=0.5,
            )
        except WaitTimeout as exc:
            return str(exc)
        return None

    def wait(self, done: Callable[[History], T | None], *, timeout: float, expected: str) -> T:
        """Wait until `done(self)` returns something truthy (not None, False or an empty list) and return it. What the
        record holds is what a timeout says it saw last, also while `done` finds nothing."""
        found: list[T | None] = [None]

        def reached(history: History) -> bool:
            found[0] = done(history)
            return bool(found[0])

        wait_for(
            lambda: self,
            reached,
            timeout=timeout,
            expected=f"{expected} (namespace {self.namespace})",
            describe=lambda _history: self.describe(),
            max_interval=0.5,
        )
        return found[0]  # type: ignore[return-value]

    def describe(self) -> str:
        """What the record holds of the namespace: each allocation, the binding, the last pod and claim status."""
        if not self.events():
            return f"the record holds no claim or pod of namespace {self.namespace}"
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


def claims_current(record: Recorder, namespace: str) -> bool:
    """Whether the record holds every write of `namespace`'s claims up to now: a quorum list's resourceVersions are the
    ones last recorded (deleted ones absent from both). Then nothing written before a binding is still in flight, also
    where no claim is written after it and the claim stream's high water stays behind it (a scenario alone)."""
    if record.cluster is None:
        return False
    try:
        listed = record.cluster.resource.list_namespaced_resource_claim(namespace)
    except Exception:  # the list cannot answer now: the stream's high water still can
        return False
    now = {c.metadata.name: int(c.metadata.resource_version or 0) for c in listed.items}
    latest = History(record, namespace).latest("claim")
    return now == {name: int(obj["metadata"].get("resourceVersion") or 0) for name, obj in latest.items()}
