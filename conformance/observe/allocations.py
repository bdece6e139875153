"""SCH-9: a device is allocated to at most one claim at a time, judged exactly over the whole run's record.

Only the allocator (kube-scheduler) writes allocations, so two claims holding one device entry (driver, pool, device)
at once is the cluster's fault whatever the implementation does; two entries of one physical device held at once
(a fabric entry and its node-local copy) is the implementation's (IMP-6, invariants.py).

Each claim's holding of an entry is an interval of etcd revisions: from the revision of the write that showed the
entry allocated to the revision of the first later write that did not (or the claim's deletion). Revisions are the
objects' own resourceVersions, so the verdict does not depend on the order the watch delivered events in (a relist
after a watch gap delivers objects in list order). A change noticed only by a relist (the watch had a gap) is cut
right after the claim's last revision seen before it: a gap can hide an overlap but never invent one.

A double allocation whose first holder was still waiting for its binding conditions a binding timeout after its
allocation (`past_binding_timeout`) is the symptom of a known kube-scheduler defect (1.37: the allocation of a pod
that timed out in PreBind is forgotten by the scheduler before it is cleared in the API; cluster/known-defects.yaml,
docs/upstream/double-allocation-after-binding-timeout.md).

Not counted: results with adminAccess (not allocated, by the API's definition) and results with a shareID (a device
that allows several allocations, DRAConsumableCapacity).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from conformance.observe.attachments import stamp
from conformance.observe.recorder import Record
from conformance.observe.slices import allocation_results
from conformance.observe.views import binding_state

Entry = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True)
class Holding:
    claim: str  # namespace/name
    uid: str
    entry: Entry
    start: int  # revision of the write that showed it allocated
    end: float  # revision of the write that no longer did; inf while held
    at: float  # when the record showing the allocation arrived
    end_at: float = math.inf  # when the record ending it arrived; inf while held


@dataclass(frozen=True)
class DoubleAllocation:
    entry: Entry
    first: Holding
    second: Holding

    @property
    def revisions(self) -> float:
        """How many etcd revisions both held the entry (inf: the first still held it when the record ended)."""
        return self.first.end - self.second.start

    @property
    def seconds(self) -> float:
        """How long both held it, as the watch delivered the two writes (inf while the first still holds it)."""
        return max(0.0, self.first.end_at - self.second.at)

    def __str__(self) -> str:
        driver, pool, device = self.entry
        if math.isinf(self.first.end):
            end = "still held"
        else:
            end = f"until revision {int(self.first.end)}: {int(self.revisions)} revisions, {self.seconds * 1000:.0f} ms"
        return (
            f"{stamp(self.second.at)} {driver} {pool}/{device} allocated to {self.second.claim} at revision "
            f"{self.second.start} while {self.first.claim} held it (allocated at revision {self.first.start}, {end})"
        )


@dataclass
class Judgement:
    claims: int = 0
    holdings: list[Holding] = field(default_factory=list)
    doubles: list[DoubleAllocation] = field(default_factory=list)


def _entries(obj: dict[str, object]) -> set[Entry]:
    return {
        (r["driver"], r["pool"], r["device"])
        for r in allocation_results(obj)  # type: ignore[arg-type]
        if not r.get("adminAccess") and r.get("shareID") is None
    }


def holdings(records: Iterable[Record]) -> tuple[int, list[Holding]]:
    """(claims seen, every claim's holding of an entry as a revision interval)."""
    by_claim: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.kind == "claim" and r.revision is not None:
            by_claim[(r.obj.get("metadata") or {}).get("uid") or f"{r.namespace}/{r.name}"].append(r)
    out: list[Holding] = []
    for uid, found in by_claim.items():
        found.sort(key=lambda r: (r.revision or 0, r.seq))
        open_: dict[Entry, Record] = {}
        last = 0
        for r in found:
            now = set() if r.type == "DELETED" else _entries(r.obj)
            revision = r.revision or 0
            # A watched change ends the holding at its own revision. A relist's SYNC (or a deletion it inferred)
            # says only that the change happened after the last revision seen: held until then, no later.
            end = revision if r.type != "SYNC" and revision > last else last + 1
            for entry in [e for e in open_ if e not in now]:
                out.append(_holding(uid, entry, open_.pop(entry), end, r.at))
            for entry in now - set(open_):
                open_[entry] = r
            last = max(last, revision)
        out += [_holding(uid, entry, first, math.inf) for entry, first in open_.items()]
    return len(by_claim), out


def _holding(uid: str, entry: Entry, first: Record, end: float, end_at: float = math.inf) -> Holding:
    return Holding(f"{first.namespace}/{first.name}", uid, entry, first.revision or 0, end, first.at, end_at)


def judge(records: Iterable[Record]) -> Judgement:
    """Every pair of claims that held one entry over overlapping revisions."""
    claims, held = holdings(records)
    judgement = Judgement(claims, held)
    by_entry: dict[Entry, list[Holding]] = defaultdict(list)
    for h in held:
        by_entry[h.entry].append(h)
    for entry, hs in by_entry.items():
        hs.sort(key=lambda h: h.start)
        for i, later in enumerate(hs):
            for earlier in hs[:i]:
                if earlier.uid != later.uid and earlier.start <= later.start < earlier.end:
                    judgement.doubles.append(DoubleAllocation(entry, earlier, later))
    return judgement


# Watch delivery jitter allowed when two allocations' delivery times are compared with the binding timeout.
TIMEOUT_SLACK_S = 1.0


def past_binding_timeout(
    records: Iterable[Record], doubles: Iterable[DoubleAllocation], timeout_s: float
) -> list[DoubleAllocation]:
    """The double allocations made while the first holder's pod had timed out in PreBind: at the second allocation's
    revision the first holder's allocation still waited for its binding conditions (none True-failed, not all True),
    and the second came at least the binding timeout after it (both as the watch delivered them, less
    TIMEOUT_SLACK_S). Both facts are read from the claims themselves, so the match needs no scheduler log."""
    wanted = list(doubles)
    uids = {d.first.uid for d in wanted}
    by_uid: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        uid = (r.obj.get("metadata") or {}).get("uid")
        if r.kind == "claim" and r.revision is not None and uid in uids and r.type != "DELETED":
            by_uid[uid].append(r)
    out = []
    for d in wanted:
        before = [r for r in by_uid.get(d.first.uid, []) if (r.revision or 0) <= d.second.start]
        if not before:
            continue
        latest = max(before, key=lambda r: (r.revision or 0, r.seq))
        if binding_state(latest.obj) == "pending" and d.second.at - d.first.at >= timeout_s - TIMEOUT_SLACK_S:
            out.append(d)
    return out
