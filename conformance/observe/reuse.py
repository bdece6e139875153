"""IMP-28: a device's second use, judged from the run-wide record. Every holding of a physical device that follows an
earlier holding of it by another claim is a reuse, named by its path: after a failure (the earlier holding ended with a
failure condition meaning `failure` True), after a move (the earlier one was on another node), readied once (a
node-local device whose binding conditions were True before), after a release (otherwise). What a stack may carry
over from the earlier use and must not:

- a stale failure: a failure condition True on the reuse while the suite armed no fault;
- a stale attachment or readiness: binding conditions (or a condition meaning `reschedule`) True before the device is
  attached to (readied on) the reuse's node, judged by the caller's `ready` (order.attach_problem against the fabric
  probe, the readiness probe's answer for a node-local gate);
- a failure not cleared: a reuse whose pod never bound (the scenario names those, with the reuse it was).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from conformance.observe import copies
from conformance.observe.attachments import SKEW_S, stamp
from conformance.observe.recorder import Record
from conformance.observe.steps import FAILURE, READY, Step, allocation_node, node_local_pools

AFTER_FAILURE, AFTER_MOVE, READIED_ONCE, AFTER_RELEASE = "after a failure", "after a move", "readied once", "released"


@dataclass(frozen=True)
class Use:
    """One claim's holding of one physical device."""

    held: copies.Held
    node: str | None

    def __str__(self) -> str:
        return f"{self.held.interval()} on {self.node}"


@dataclass(frozen=True)
class Reuse:
    path: str  # AFTER_FAILURE, AFTER_MOVE, READIED_ONCE or AFTER_RELEASE
    use: Use
    before: Use

    @property
    def identity(self) -> str:
        return self.use.held.identity

    def __str__(self) -> str:
        return f"{self.identity} reused ({self.path}): {self.use}, after {self.before}"


def reuses(found: list[Step], namespaces: set[str], records: Iterable[Record], **reading: Any) -> list[Reuse]:
    """Every reuse by a claim of `namespaces`, with the device's use just before it (any claim of the run). `found`:
    the record's steps; `reading`: driver, attribute, identities and meanings, as steps.steps read them."""
    driver, attribute, identities = reading["driver"], reading["attribute"], reading["identities"]
    meanings: dict[str, str] = reading["meanings"]
    records = [r for r in records if r.kind in copies.KINDS]
    held, _ = copies.identify(records, driver, attribute, identities)
    nodes = {}
    for r in records:
        if r.kind == "claim" and r.type != "DELETED":
            allocation = (r.obj.get("status") or {}).get("allocation")
            if allocation:
                nodes[((r.obj.get("metadata") or {}).get("uid"), r.revision)] = allocation_node(allocation)
    local = node_local_pools(records, driver)
    ready = {(s.uid, s.allocated, s.pool, s.device) for s in found if s.what == READY}
    by_identity: dict[str, list[Use]] = defaultdict(list)
    for h in held:
        by_identity[h.identity].append(Use(h, nodes.get((h.uid, h.start))))
    out = []
    for uses in by_identity.values():
        uses.sort(key=lambda u: u.held.start)
        for i, use in enumerate(uses):
            if use.held.claim.split("/")[0] not in namespaces:
                continue
            before = next((u for u in reversed(uses[:i]) if u.held.uid != use.held.uid), None)
            if before is None:
                continue
            b = before.held
            if b.let_go and meanings.get(b.let_go, FAILURE) == FAILURE:
                path = AFTER_FAILURE
            elif before.node and use.node and before.node != use.node:
                path = AFTER_MOVE
            elif b.entry[1] in local and (b.uid, b.start, b.entry[1], b.entry[2]) in ready:
                path = READIED_ONCE
            else:
                path = AFTER_RELEASE
            out.append(Reuse(path, use, before))
    return sorted(out, key=lambda r: r.use.held.start)


def judge(
    found: list[Reuse],
    steps: list[Step],
    armed_until: float,
    ready: Callable[[Step], str | None] | None,
    armed_revision: int = 0,
) -> list[str]:
    """What each reuse carried over from its earlier use, the reuse named first. `armed_until`, `armed_revision`:
    when the suite disarmed its faults, and the cluster's revision then (0: not known); a failure on an allocation
    made before that may be the suite's own, whenever it was written. `ready`: why a step's conditions were True
    before the device was attached or readied there (None: not judged, no probe)."""
    by_use: dict[tuple[str, int, str, str], list[Step]] = defaultdict(list)
    for s in steps:
        by_use[(s.uid, s.allocated, s.pool, s.device)].append(s)
    out = []
    for reuse in found:
        h = reuse.use.held
        for s in by_use.get((h.uid, h.start, h.entry[1], h.entry[2]), []):
            # A failure on an allocation made while the faults were armed may be theirs whenever it was written or
            # delivered (a retry on another device refused just before the disarm); one on an allocation made after
            # them cannot be: by revision, else delivered later than the streams' skew after the disarm.
            after = h.start > armed_revision if armed_revision else h.at > armed_until + SKEW_S
            if s.what == FAILURE and s.at > armed_until and after:
                out.append(
                    f"{reuse.identity} reused ({reuse.path}): stale failure: {list(s.conditions)} True at "
                    f"{s.moment} on {s} though the suite armed no fault then (its faults went at "
                    f"{stamp(armed_until)}); the earlier use: {reuse.before}"
                )
            elif s.what != FAILURE and ready is not None and (problem := ready(s)):
                out.append(
                    f"{reuse.identity} reused ({reuse.path}): stale state: {problem}; the earlier use: {reuse.before}"
                )
    return out
