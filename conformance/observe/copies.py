"""IMP-27: the races of a device's copies, judged at every revision of the run's record.

One physical device can be listed twice: as a fabric entry and as the node-local copy the node driver publishes once
it is hot-plugged (keep-in-pool hides that copy; reschedule-to-local moves the claim onto it by a reallocation;
count-based pools name the device only on the copy). While any allocation holds the device, through either copy,

- no other claim may hold it through another copy (held twice): each claim's holding of an entry is an interval of
  etcd revisions, exactly as SCH-9 judges one entry (allocations.holdings), here grouped by physical identity; two
  claims holding ONE entry is the allocator's fault (SCH-9), listed apart and not judged here;
- no copy of it may be offered free (offered while held): slices, claims and DeviceTaintRules replayed in revision
  order, a copy of the held device in its pool's newest generation, not allocated, not tainted NoSchedule/NoExecute
  (in the device or by a rule). An offer shorter than one probe period by the record's clock is excused (a claim
  change seen only after a watch gap may start a holding late); nothing longer is.

A holding ends at the clearing of the allocation, or earlier at the first write that shows one of its failure conditions
True: with it the stack lets the device go (the scheduler never binds that allocation and clears it on the pod's next
try). Counting it until the clearing would fail every correct reschedule-to-local stack: kube-scheduler tries the
rescheduled pod again within milliseconds of its own deallocation (SchedulerPopFromBackoffQ), before any controller can
lift what hides the copy, so the pod would take another device (a second attach) on every move. A stack that acts on
the let-go allocation afterwards (detaches what another pod now uses) fails IMP-10.

Identity of a holding: the identity attribute of the entry (from any slice of the run); else the device the claim's
status names (status.devices[].data, a count entry's device); else the fabric probe: the one device whose attach to the
allocation's node began while the holding lasted (a count entry of a stack that names no device).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.observe.allocations import Entry, holdings
from conformance.observe.attachments import SKEW_S, stamp
from conformance.observe.recorder import Record
from conformance.observe.replay import free_entries, replay
from conformance.observe.slices import allocation_results, device_conditions, result_key

KINDS = ("claim", "slice", "taintrule", "probe")


@dataclass(frozen=True)
class Held:
    """One claim's holding of one entry, with the physical device it is."""

    claim: str  # namespace/name
    uid: str
    entry: Entry
    identity: str
    how: str  # how the identity was read: "identity attribute", "status data", "fabric probe"
    start: int  # revision of the write that showed it allocated
    end: float  # revision of the first write that did not; inf while held
    at: float  # when the record received the allocation
    end_at: float = math.inf
    let_go: str = ""  # the failure condition whose True ended the holding before the clearing

    def interval(self) -> str:
        end = "still held" if math.isinf(self.end) else f"to revision {int(self.end)} ({stamp(self.end_at)})"
        end += f" ({self.let_go} True)" if self.let_go else ""
        _, pool, device = self.entry
        return f"{self.claim} held {pool}/{device} from revision {self.start} ({stamp(self.at)}) {end}"


@dataclass(frozen=True)
class Overlap:
    identity: str
    first: Held
    second: Held

    @property
    def revisions(self) -> float:
        return min(self.first.end, self.second.end) - self.second.start

    def __str__(self) -> str:
        return (
            f"physical device {self.identity} held twice for {self.revisions:g} revisions: {self.second.interval()} "
            f"(identity by {self.second.how}) while {self.first.interval()} (identity by {self.first.how})"
        )


@dataclass
class Races:
    """What the judgement saw and found."""

    identities: list[str] = field(default_factory=list)  # the physical devices judged
    holdings: list[Held] = field(default_factory=list)  # every holding of them, any claim of the run
    revisions: int = 0  # revisions replayed while one of them was held
    held_twice: list[Overlap] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)  # offered while held, with the moment and objects
    scheduler: list[Overlap] = field(default_factory=list)  # one entry in two claims: SCH-9's, not judged here
    unidentified: list[str] = field(default_factory=list)  # holdings of the scenario no identity could be read for

    @property
    def violations(self) -> list[str]:
        return [str(o) for o in self.held_twice] + self.offered


def _node(allocation: dict[str, Any]) -> str | None:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    names = {
        v for t in terms for f in t.get("matchFields") or [] if f.get("key") == "metadata.name" for v in f["values"]
    }
    return next(iter(names)) if len(names) == 1 else None


def _data(obj: dict[str, Any], entry: Entry, attribute: str) -> str | None:
    name = attribute.rpartition("/")[2]
    for d in (obj.get("status") or {}).get("devices") or []:
        if result_key(d) == entry:
            value = (d.get("data") or {}).get(name) or (d.get("data") or {}).get(attribute)
            if value:
                return str(value)
    return None


def identify(
    records: list[Record], driver: str, attribute: str, identities: dict[tuple[str, str], str]
) -> tuple[list[Held], list[str]]:
    """Every holding of an entry of `driver` with its physical identity; and the holdings none could be read for."""
    claims: dict[str, list[Record]] = defaultdict(list)
    attaches: list[Record] = []
    for r in records:
        if r.kind == "claim" and r.type != "DELETED":
            claims[(r.obj.get("metadata") or {}).get("uid") or f"{r.namespace}/{r.name}"].append(r)
        elif r.kind == "probe" and r.obj["state"] in ("attaching", "attached") and not r.obj["previous"]:
            attaches.append(r)
    out, unknown = [], []
    for h in holdings(r for r in records if r.kind == "claim")[1]:
        if h.entry[0] != driver:
            continue
        during = [r for r in claims.get(h.uid, []) if h.start <= (r.revision or 0) < h.end]
        identity, how = identities.get(h.entry[1:]), "identity attribute"
        if identity is None:
            identity, how = next((i for r in during if (i := _data(r.obj, h.entry, attribute))), None), "status data"
        if identity is None:
            allocation = (during[0].obj.get("status") or {}).get("allocation") or {} if during else {}
            node = _node(allocation)
            began = {a.name for a in attaches if a.obj["node"] == node and h.at - SKEW_S <= a.at <= h.end_at}
            identity, how = (began.pop(), "fabric probe") if len(began) == 1 else (None, "")
        if identity is None:
            unknown.append(
                f"{h.claim} {h.entry[1]}/{h.entry[2]} (revision {h.start}): no identity attribute, no device "
                "in its status, no single attach to its node in the probe while it was held"
            )
            continue
        end, end_at, let_go = h.end, h.end_at, ""
        for r in sorted(during, key=lambda r: (r.revision or 0, r.seq)):
            if failing := _failing(r.obj, h.entry):
                end, end_at, let_go = r.revision or 0, r.at, failing
                break
        out.append(Held(h.claim, h.uid, h.entry, identity, how, h.start, end, h.at, end_at, let_go))
    return out, unknown


def _failing(obj: dict[str, Any], entry: Entry) -> str:
    """The failure condition True on this entry of the claim ("" if none): the claim lets the device go with it."""
    for x in allocation_results(obj):
        if result_key(x) == entry:
            states = device_conditions(obj, x)
            return next((t for t in x.get("bindingFailureConditions") or [] if states.get(t) == "True"), "")
    return ""


def _overlaps(held: list[Held], races: Races) -> None:
    by_identity: dict[str, list[Held]] = defaultdict(list)
    for h in held:
        by_identity[h.identity].append(h)
    for hs in by_identity.values():
        hs.sort(key=lambda h: h.start)
        for i, later in enumerate(hs):
            for earlier in hs[:i]:
                if earlier.uid != later.uid and earlier.start <= later.start < earlier.end:
                    found = Overlap(later.identity, earlier, later)
                    (races.scheduler if earlier.entry == later.entry else races.held_twice).append(found)


def _replay(records: list[Record], held: list[Held], driver: str, races: Races) -> None:
    """Offers of a held device's copies, at every revision one of the judged devices was held."""
    by_identity: dict[str, list[Held]] = defaultdict(list)
    for h in held:
        by_identity[h.identity].append(h)
    first = min((h.start for h in held), default=0)
    opened: dict[str, tuple[Record, list[str], list[Held]]] = {}

    def close(identity: str, at: float) -> None:
        r, entries, holders = opened.pop(identity)
        # Opened and closed by records of two streams (slice, claim, rule): a lag between them inflates a few
        # milliseconds' offer; under the streams' skew it cannot be told from one (as the invariants' PERSIST_S).
        if at - r.at >= SKEW_S:
            races.offered.append(
                f"physical device {identity} offered free from revision {r.revision} ({stamp(r.at)}, {r.kind} "
                f"{r.name}) for {at - r.at:.2f} s: {', '.join(entries)}, while "
                + "; ".join(h.interval() for h in holders)
            )

    revisions: set[int] = set()
    end = 0.0
    for r, state in replay(records, driver):
        end = max(end, r.at)
        revision = r.revision or 0
        if revision < first:
            continue
        for identity, hs in by_identity.items():
            holders = [h for h in hs if h.start <= revision < h.end]
            if holders:
                revisions.add(revision)
            offers = free_entries(state, driver, identity) if holders else []
            if offers and identity not in opened:
                opened[identity] = (r, offers, holders)
            elif not offers and identity in opened:
                close(identity, r.at)
    for identity in list(opened):
        close(identity, end)
    races.revisions = len(revisions)


def judge(
    records: Iterable[Record],
    driver: str,
    attribute: str,
    identities: dict[tuple[str, str], str],
    namespaces: set[str],
) -> Races:
    """The races of every physical device a claim of `namespaces` held, against every claim of the record."""
    records = [r for r in records if r.kind in KINDS]
    held, unknown = identify(records, driver, attribute, identities)
    chosen = sorted({h.identity for h in held if h.claim.split("/")[0] in namespaces})
    races = Races(chosen, [h for h in held if h.identity in chosen])
    races.unidentified = [u for u in unknown if u.split("/")[0] in namespaces]
    _overlaps(races.holdings, races)
    _replay(records, races.holdings, driver, races)
    return races
