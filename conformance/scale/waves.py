"""One wave's moments per pod, read from the run-wide record (created, its claim allocated, its binding conditions all
True, bound), and the figures they give: pods bound per second, the most pods waiting in PreBind at once, and the
time from the condition write to the binding. Pure: the record's entries in, numbers out."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.observe.recorder import Record
from conformance.observe.slices import allocation_results
from conformance.observe.views import binding_state


@dataclass
class PodMoments:
    created: float | None = None
    claim: str = ""
    node: str = ""
    bound: float | None = None  # first seen with spec.nodeName
    bound_revision: int = 0


@dataclass
class ClaimMoments:
    allocated: float | None = None  # first seen with an allocation
    ready: float | None = None  # first seen with every binding condition True
    ready_revision: int = 0
    nodes: set[str] = field(default_factory=set)  # the allocation's node (bindsToNode / node-local)


@dataclass
class Moments:
    namespace: str
    pods: dict[str, PodMoments] = field(default_factory=dict)
    claims: dict[str, ClaimMoments] = field(default_factory=dict)
    seen: int = 0  # how far the record has been read (Recorder.after_seq)

    def claim_of(self, pod: str) -> ClaimMoments:
        return self.claims.get(self.pods[pod].claim) or ClaimMoments()

    def take(self, records: Iterable[Record]) -> Moments:
        """Read more of the record (only this namespace's pods and claims count): a wave is followed as it goes
        without reading the whole record again at every look."""
        for r in records:
            self.seen += 1
            if r.namespace != self.namespace or r.type == "DELETED":
                continue
            if r.kind == "pod":
                self._pod(r)
            elif r.kind == "claim":
                self._claim(r)
        return self

    def _pod(self, r: Record) -> None:
        pod = self.pods.setdefault(r.name, PodMoments())
        if pod.created is None:
            pod.created = r.at
        statuses = (r.obj.get("status") or {}).get("resourceClaimStatuses") or []
        pod.claim = pod.claim or next((s["resourceClaimName"] for s in statuses if s.get("resourceClaimName")), "")
        if (node := (r.obj.get("spec") or {}).get("nodeName")) and pod.bound is None:
            pod.node, pod.bound, pod.bound_revision = node, r.at, r.revision or 0

    def _claim(self, r: Record) -> None:
        claim = self.claims.setdefault(r.name, ClaimMoments())
        if allocation_results(r.obj) and claim.allocated is None:
            claim.allocated = r.at
            claim.nodes = _allocation_nodes(r.obj)
        if claim.ready is None and binding_state(r.obj) == "ready":
            claim.ready, claim.ready_revision = r.at, r.revision or 0


def _allocation_nodes(claim: dict[str, Any]) -> set[str]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    return {v for t in terms for f in t.get("matchFields") or [] for v in f.get("values") or []}


def moments(records: Iterable[Record], namespace: str) -> Moments:
    """Each pod's and claim's first moments in `namespace`, as the watches delivered them."""
    return Moments(namespace).take(records)


def quantile(values: list[float], q: float) -> float | None:
    """The q-quantile of raw values (nearest rank); None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(round(q * len(ordered), 9)) - 1))]


def peak_waiting(m: Moments) -> int:
    """The most pods seen at one moment with their claim allocated and the pod not yet bound (in PreBind)."""
    steps: list[tuple[float, int]] = []
    for name, pod in m.pods.items():
        allocated = m.claim_of(name).allocated
        if allocated is None:
            continue
        steps.append((allocated, 1))
        if pod.bound is not None:
            steps.append((max(pod.bound, allocated), -1))
    peak = current = 0
    for _, step in sorted(steps, key=lambda s: (s[0], s[1])):  # a binding at the same moment ends first
        current += step
        peak = max(peak, current)
    return peak


def _rounded(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


def figures(m: Moments, released: float | None = None) -> dict[str, Any]:
    """A wave's figures. `released`: the moment the hold on the conditions was let go (None: no hold)."""
    created = [p.created for p in m.pods.values() if p.created is not None]
    bound = [p.bound for p in m.pods.values() if p.bound is not None]
    allocated = [a for name in m.pods if (a := m.claim_of(name).allocated) is not None]
    out: dict[str, Any] = {"pods": len(m.pods), "bound": len(bound), "peakWaiting": peak_waiting(m)}
    if not created:
        return out
    start = min(created)
    out["secondsToAllCreated"] = _rounded(max(created) - start, 2)  # the pace the waves are offered at
    if bound:
        seconds = max(bound) - start
        out |= {"secondsToAllBound": _rounded(seconds, 2), "podsBoundPerSecond": _rounded(len(bound) / seconds, 2)}
    if allocated:  # the scheduling cycles: first pod created -> last claim allocated
        seconds = max(allocated) - start
        out |= {"secondsToAllAllocated": _rounded(seconds, 2)}
        out |= {"podsAllocatedPerSecond": _rounded(len(allocated) / seconds, 2) if seconds > 0 else None}
    gaps = [p.bound - c.ready for name, p in m.pods.items() if p.bound and (c := m.claim_of(name)).ready]
    readies = [c.ready for name in m.pods if (c := m.claim_of(name)).ready is not None]
    if gaps and bound:
        out["conditionToBound"] = {
            "p50": _rounded(quantile(gaps, 0.5)),
            "p99": _rounded(quantile(gaps, 0.99)),
            "max": _rounded(max(gaps)),
            "lastConditionToLastBound": _rounded(max(bound) - max(readies)),
        }
    if released is not None and bound:
        drain = max(bound) - released
        out |= {"releaseToAllBound": _rounded(drain, 2), "boundPerSecondAfterRelease": _rounded(len(bound) / drain, 2)}
        out["releaseToLastCondition"] = _rounded(max(readies) - released, 2) if readies else None
    misplaced = [
        n for n, p in m.pods.items() if p.bound and (nodes := m.claim_of(n).nodes) and p.node not in nodes
    ]  # bound elsewhere than its allocation's node
    out["misplaced"] = len(misplaced)
    return out
