"""The fabric's truth against the API's, for every device of the run, judged from the run-wide record.

Three rules (catalogue IMP-10..12), each compared moment by moment: the record keeps every claim and pod change
with the time its watch delivered it, and every probe answer with the time its request was sent and the time the
answer came back, so an answer is the fabric's state at some moment inside [sent, received]:

- IMP-10 attached while used: from the moment a pod is seen bound until it is seen deleted or its node is (less one
  probe period, for the watch's delivery lag), every probe answer that lies wholly inside that window says each
  device of the pod's claims is attached to the pod's node;
- IMP-11 no condition ahead of the fabric: while all binding conditions of an allocated device are seen True,
  every probe answer wholly inside that stretch (less one probe period at its end, for the watch's delivery lag)
  says the device is attached to the allocation's node;
- IMP-12 no attachment outlives its claim: every probe answer that lists a device (attaching, attached,
  detaching) falls while an allocation holds it, or within detachSeconds (plus one probe period, plus what the suite
  itself held back: IMP-8's refused or hung detach across a restart, a release made while the role was down, any
  restart of a stack process by the suite) of the last release (of the end of the attach,
  if one was still in flight then); a device with identified fabric entries is offered again by then (or held again).

Devices are identified by their published copies (the identity attribute), else by status.devices[].data (a
counted fabric entry names the device it became there); an allocation of a counted entry that never named one is a
possible holder of any device the fabric attached to its node. A device the probe never listed and no fabric slice
published is node-local by nature: none of these rules is about it.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.observe.recorder import PROBE_PERIOD_S, Record, Recorder, Sample
from conformance.observe.slices import allocation_results, device_conditions, result_key

SKEW_S = 1.0  # an attach seen up to this long before the allocation's watch event is stream skew, not a violation


def stamp(at: float | None) -> str:
    if at is None:
        return "(not yet)"
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


@dataclass
class Held:
    """One allocated device of one claim, from the write that allocated it to the one that cleared it."""

    claim: str  # ns/name
    pool: str
    device: str
    node: str | None  # the allocation's node (bindsToNode / node-local), None if not pinned to one
    start: float
    end: float | None  # None: still allocated when the record was read
    revision: int
    identity: str | None = None
    conditions: list[str] = field(default_factory=list)  # binding conditions
    true: list[tuple[float, float | None]] = field(default_factory=list)  # stretches with all conditions True
    # stretches with a condition True that the profile says means reschedule: "attached, now reallocate me"
    again: list[tuple[float, float | None]] = field(default_factory=list)
    end_revision: int | None = None  # the revision of the write that cleared it

    def covers(self, sent: float, received: float) -> bool:
        return self.start - SKEW_S <= received and (self.end is None or self.end >= sent)

    def __str__(self) -> str:
        return f"{self.claim} {self.pool}/{self.device} ({self.identity or 'unidentified'}) on {self.node}"


@dataclass
class Used:
    """A bound pod of the run and what it holds."""

    pod: str  # ns/name
    node: str
    bound: float
    revision: int
    gone: float | None
    claims: list[str]
    deleting: float | None = None  # first seen with a deletionTimestamp
    node_gone: float | None = None  # its node seen deleted after the binding (IMP-16): nothing runs there any more
    deleting_revision: int | None = None  # the revision of the write that set the deletionTimestamp


def bound_with(h: Held, u: Used, skew: float = 0.0) -> bool:
    """Whether pod `u` can have been bound with allocation `h`: allocated by the binding's delivery (less `skew`) and
    not cleared before it, neither as delivered nor at a revision before the binding's. Two watch streams can deliver
    a clearing and a later binding in the other order: soak 2026-12-07, a claim's fabric allocation cleared at
    revision 4616 was delivered 1 ms after the bind at 4621 that used its node-local copy."""
    return (
        h.start - skew <= u.bound
        and (h.end is None or h.end > u.bound)
        and not (h.end_revision and u.revision and h.end_revision < u.revision)
    )


@dataclass
class Verdicts:
    """What each rule found, and what it could not judge (with why)."""

    checked: dict[str, int] = field(default_factory=dict)  # rule -> how many windows were judged
    violations: dict[str, list[str]] = field(default_factory=dict)
    unjudged: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, rule: str, message: str) -> None:
        self.violations.setdefault(rule, []).append(message)

    def skip(self, rule: str, message: str) -> None:
        self.unjudged.setdefault(rule, []).append(message)

    def count(self, rule: str) -> None:
        self.checked[rule] = self.checked.get(rule, 0) + 1


def _node(allocation: dict[str, Any]) -> str | None:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    names = {
        v
        for t in terms
        for f in t.get("matchFields") or []
        if f["key"] == "metadata.name" and f["operator"] == "In"
        for v in f["values"]
    }
    return next(iter(names)) if len(names) == 1 else None


def data_identity(claim: dict[str, Any], result: dict[str, Any], attribute: str) -> str | None:
    """The device a claim's status.devices[].data names for an allocated entry (a count entry's, where written)."""
    name = attribute.rpartition("/")[2]
    for entry in (claim.get("status") or {}).get("devices") or []:
        if result_key(entry) == result_key(result):
            value = (entry.get("data") or {}).get(name) or (entry.get("data") or {}).get(attribute)
            return str(value) if value else None
    return None


def _stretch(stretches: list[tuple[float, float | None]], on: bool, at: float) -> None:
    """Open or close the last stretch at `at`."""
    open_ = bool(stretches) and stretches[-1][1] is None
    if on and not open_:
        stretches.append((at, None))
    elif not on and open_:
        stretches[-1] = (stretches[-1][0], at)


def holdings(
    records: Iterable[Record],
    driver: str,
    attribute: str,
    identities: dict[tuple[str, str], str],
    reschedule: frozenset[str] = frozenset(),
) -> list[Held]:
    """Every allocated device of the driver, per claim, with its identity and the stretches in which its binding
    conditions were all True, and those in which a condition meaning reschedule was True."""
    out: list[Held] = []
    current: dict[str, tuple[tuple[Any, ...], list[Held]]] = {}
    for r in sorted((r for r in records if r.kind == "claim"), key=lambda r: r.revision or 0):
        name = f"{r.namespace}/{r.name}"
        allocation = None if r.type == "DELETED" else (r.obj.get("status") or {}).get("allocation")
        results = [x for x in allocation_results(r.obj) if x["driver"] == driver] if allocation else []
        key = (allocation.get("allocationTimestamp"), tuple(result_key(x) for x in results)) if allocation else None
        if name in current and current[name][0] != key:
            for h in current.pop(name)[1]:
                h.end, h.end_revision = r.at, r.revision
                _stretch(h.true, False, r.at)
                _stretch(h.again, False, r.at)
        if not results:
            continue
        if name not in current:
            held = [Held(name, x["pool"], x["device"], _node(allocation), r.at, None, r.revision or 0) for x in results]
            for h, x in zip(held, results, strict=True):
                h.conditions = list(x.get("bindingConditions") or [])
                h.identity = identities.get((x["pool"], x["device"]))
            current[name] = (key, held)
            out += held
        for h, x in zip(current[name][1], results, strict=True):
            h.identity = h.identity or data_identity(r.obj, x, attribute)
            if not h.conditions:
                continue
            states = device_conditions(r.obj, x)
            _stretch(h.true, all(states.get(t) == "True" for t in h.conditions), r.at)
            _stretch(h.again, any(states.get(t) == "True" for t in reschedule), r.at)
    return out


def usages(records: Iterable[Record]) -> list[Used]:
    """Every pod of the run that was bound: where, from when, until when, with which claims."""
    out: dict[str, Used] = {}
    for r in sorted((r for r in records if r.kind == "pod"), key=lambda r: r.revision or 0):
        name = f"{r.namespace}/{r.name}"
        if r.type == "DELETED":
            if name in out and out[name].gone is None:
                out[name].gone = r.at
            continue
        node = (r.obj.get("spec") or {}).get("nodeName")
        named = (r.obj.get("status") or {}).get("resourceClaimStatuses") or []
        named += (r.obj.get("spec") or {}).get("resourceClaims") or []
        claims = sorted({f"{r.namespace}/{s['resourceClaimName']}" for s in named if s.get("resourceClaimName")})
        if node and name not in out:
            out[name] = Used(name, node, r.at, r.revision or 0, None, claims)
        elif name in out:
            out[name].claims = sorted(set(out[name].claims) | set(claims))
        if name in out and out[name].deleting is None and (r.obj.get("metadata") or {}).get("deletionTimestamp"):
            out[name].deleting, out[name].deleting_revision = r.at, r.revision
    deleted: dict[str, list[Record]] = {}
    for r in records:
        if r.kind == "node" and r.type == "DELETED":
            deleted.setdefault(r.name, []).append(r)
    for u in out.values():
        after = [r.at for r in deleted.get(u.node, []) if _later(r.revision, r.at, u.revision, u.bound)]
        u.node_gone = min(after, default=None)
    return list(out.values())


def _later(revision: int | None, at: float, than_revision: int | None, than_at: float) -> bool:
    """Whether a write came at or after another: by revision when both have one (two watch streams can deliver them
    in the other order), else as delivered."""
    if revision and than_revision:
        return revision >= than_revision
    return at >= than_at


def use_ends(u: Used, h: Held) -> dict[str, float]:
    """How pod `u`'s use of allocation `h` ended, each with when it was delivered: the pod deleted, its node deleted,
    or the claim released by the control plane after the pod's deletion began (kube-controller-manager does once the
    pod no longer runs; its object may linger: kwok, finalizers)."""
    ends = {"deleted": u.gone, "its node deleted": u.node_gone}
    if u.deleting is not None and h.end is not None and _later(h.end_revision, h.end, u.deleting_revision, u.deleting):
        ends["its claim released"] = h.end
    return {why: t for why, t in ends.items() if t is not None}


def attaches(records: Iterable[Record], devices: set[str], node: str, since: float, until: float) -> int:
    """How many attaches of `devices` to `node` the probe saw begin within [since - SKEW_S, until]: changes from
    free to attaching or attached (an attach shorter than the probe period is seen as one to attached)."""
    return sum(
        1
        for r in records
        if r.kind == "probe"
        and r.name in devices
        and r.obj["node"] == node
        and r.obj["state"] in ("attaching", "attached")
        and not r.obj["previous"]
        and since - SKEW_S <= r.at <= until
    )


def _within(samples: list[Sample], start: float, end: float | None) -> list[Sample]:
    """The answers wholly inside [start, end]: sent at or after start, back at or before end."""
    i = bisect.bisect_left(samples, start, key=lambda s: s.sent)
    return [s for s in samples[i:] if end is None or s.received <= end]


def _said(sample: Sample, identity: str) -> str:
    said = sample.states.get(identity, "free")
    return f"the probe answer sent {stamp(sample.sent)}, back {stamp(sample.received)}, says {said}"


@dataclass
class Judge:
    """The three rules over one record (judge() may be called again as the record grows)."""

    driver: str
    attribute: str
    detach_s: float
    period: float = PROBE_PERIOD_S
    # Conditions the profile says mean reschedule: True on a fabric allocation, they say "attached, reallocate me to
    # the node-local copy" (reschedule-to-local's happy path), so they are judged like binding conditions, except
    # while another claim holds the same device (contention: "in use, try another").
    reschedule: frozenset[str] = frozenset()

    def judge(self, record: Recorder, end: float | None = None) -> Verdicts:
        records = record.select(("claim", "pod", "slice", "node"))
        samples = record.samples()
        verdicts = Verdicts()
        if not samples:
            return verdicts
        end = end or samples[-1].received
        held = holdings(records, self.driver, self.attribute, record.identities(), self.reschedule)
        fabric = self._fabric_identities(records, samples)
        self._attached_while_used(verdicts, held, usages(records), samples, fabric)
        self._conditions_follow_the_fabric(verdicts, held, samples)
        self._no_attachment_outlives_its_claim(verdicts, held, samples, records, end, record)
        return verdicts

    def _fabric_identities(self, records: list[Record], samples: list[Sample]) -> set[str]:
        """Devices the fabric deals in: listed by the probe once, or published by a fabric slice of the driver."""
        out = {i for s in samples for i in s.states}
        for r in records:
            if r.kind == "slice" and r.obj.get("driver") == self.driver and not r.obj.get("nodeName"):
                out |= {d["identity"] for d in r.obj["devices"] if "identity" in d}
        return out

    def _attached_while_used(
        self, v: Verdicts, held: list[Held], used: list[Used], samples: list[Sample], fabric: set[str]
    ) -> None:
        rule = "IMP-10"
        for u in used:
            # The scheduler binds a pod only where its claims' allocations allow: an allocation pinned to another node
            # is not the one it bound with (the claim stream may record a reallocation after the bind, under load),
            # nor is one cleared at a revision before the bind's, whenever the claim stream delivered that clearing
            # (reschedule-to-local: the fabric allocation, cleared before the node-local copy's, same node).
            devices = [h for h in held if h.claim in u.claims and h.node in (None, u.node) and bound_with(h, u)]
            for h in devices:
                if h.identity is None:
                    v.skip(rule, f"{u.pod}: {h} names no physical device (no identity published, no status data)")
                    continue
                if h.identity not in fabric:
                    continue
                v.count(rule)
                # A deleted node ends the use too: an implementation may detach from a node that is gone before the
                # control plane has collected the pod (IMP-16 asks for the detach; when is the implementation's).
                known = list(use_ends(u, h).values())
                until = min(known) - SKEW_S if known else None  # the end is as delivered: its stream may lag it
                wrong = [
                    s for s in _within(samples, u.bound, until) if s.states.get(h.identity) != (u.node, "attached")
                ]
                if wrong:
                    v.fail(
                        rule,
                        f"pod {u.pod} bound on {u.node} at {stamp(u.bound)} (revision {u.revision}), deleted at "
                        f"{stamp(u.gone)}: device {h.identity} of {h.claim} ({h.pool}/{h.device}): "
                        f"{_said(wrong[0], h.identity)} ({len(wrong)} such answers while the pod was bound)",
                    )

    def _conditions_follow_the_fabric(self, v: Verdicts, held: list[Held], samples: list[Sample]) -> None:
        rule = "IMP-11"
        for h in held:
            stretches = [(start, stop, f"binding conditions {h.conditions}") for start, stop in h.true]
            stretches += [
                (start, stop, f"a condition meaning reschedule {sorted(self.reschedule)}")
                for start, stop in h.again
                if not any(o is not h and o.identity == h.identity and o.covers(start, start) for o in held)
            ]
            for start, stop, what in stretches:
                if h.identity is None:
                    v.skip(rule, f"{h}: {what} True from {stamp(start)}, device never named")
                    continue
                v.count(rule)
                until = None if stop is None else stop - SKEW_S  # the stop is as delivered: the stream may lag it
                wrong = [s for s in _within(samples, start, until) if s.states.get(h.identity) != (h.node, "attached")]
                if wrong:
                    v.fail(
                        rule,
                        f"{h}: {what} True from {stamp(start)} until {stamp(stop)}; "
                        f"{_said(wrong[0], h.identity)} ({len(wrong)} such answers; tolerance {SKEW_S:g}s)",
                    )

    def _no_attachment_outlives_its_claim(
        self, v: Verdicts, held: list[Held], samples: list[Sample], records: list[Record], end: float, record: Recorder
    ) -> None:
        rule = "IMP-12"
        before = set(samples[0].states)  # attached before the run looked: not the run's
        listing: dict[str, list[Sample]] = {}
        for s in samples:
            for identity in s.states:
                if identity not in before:
                    listing.setdefault(identity, []).append(s)
        anonymous = [h for h in held if h.identity is None]
        grace = self.detach_s + self.period
        for identity, seen in sorted(listing.items()):
            own = [h for h in held if h.identity == identity]
            v.count(rule)
            for s in seen:
                node = s.states[identity][0]
                holders = own + [h for h in anonymous if h.node in (None, node)]
                if any(h.covers(s.sent, s.received) for h in holders):
                    continue
                last = max((h.end for h in holders if h.end is not None and h.end <= s.sent), default=None)
                due = _attach_end(samples, identity, last) if last is not None else None
                # What the suite itself held back (IMP-8's held detach, a restart it made) is not the stack's delay.
                if due is not None and s.sent - due <= grace + record.held_between(identity, due, s.sent):
                    continue
                why = "no allocation of the run ever held it"
                if last is not None:
                    why = f"its last holder was released at {stamp(last)}, {s.sent - last:.1f}s before"
                    why += f" (its attach in flight then ended at {stamp(due)})" if due != last else ""
                held_back = record.held_between(identity, due, s.sent) if due is not None else 0.0
                why += f", {held_back:.1f}s of it held back by the suite" if held_back else ""
                v.fail(rule, f"{identity} on {node}: {_said(s, identity)}; {why} (detachSeconds {self.detach_s:g})")
                break
            self._offered_again(v, identity, own, samples, records, end, record)

    def _offered_again(
        self,
        v: Verdicts,
        identity: str,
        own: list[Held],
        samples: list[Sample],
        records: list[Record],
        end: float,
        record: Recorder,
    ) -> None:
        """After its last release, a device with identified fabric entries is offered by one again (or held)."""
        rule = "IMP-12"
        ends = [h.end for h in own if h.end is not None]
        if not own or len(ends) < len(own):
            return  # never identified by a fabric entry, or held until the end
        last = max(ends)
        start = _attach_end(samples, identity, last)
        due = _deadline(record, identity, start, self.detach_s + self.period)  # the suite's holds up to it counted out
        if due > end:
            return
        entries = [r for r in records if r.kind == "slice" and r.obj.get("driver") == self.driver]
        if not any(not r.obj.get("nodeName") and any("identity" in d for d in r.obj["devices"]) for r in entries):
            v.skip(rule, f"{identity}: the fabric pools name no device (counted entries): offered again not judged")
            return
        # Any moment up to the due time will do: a pool being rewritten shows two generations for a moment, and an
        # entry of the older one does not count then (persistence is IMP-5's question).
        moments = [r.at for r in entries if last <= r.at <= due] + [due]
        if any(_offered(entries, identity, at) for at in moments):
            return
        v.fail(
            rule,
            f"{identity}: released at {stamp(last)}, offered by no fabric entry (of its pool's newest generation, "
            f"untainted) from then until {stamp(due)} (detachSeconds {self.detach_s:g} later)",
        )


def _deadline(record: Recorder, identity: str, start: float, allowance: float) -> float:
    """`allowance` seconds of the stack's own time from `start`: the time the suite held the device back (or had the
    stack down) before that moment does not count."""
    due = start + allowance
    for _ in range(100):  # each hold found moves the deadline, which may reach the next hold
        moved = start + allowance + record.held_between(identity, start, due)
        if moved <= due:
            break
        due = moved
    return due


def _attach_end(samples: list[Sample], identity: str, release: float) -> float:
    """When detachSeconds starts for a device released at `release`: then, or, if the fabric was still attaching it,
    at the first answer that no longer says attaching (a device cannot be detached before its attach is over; IMP-13
    counts from the same moment). An attach that never ends gets no allowance: the release is the start."""
    i = bisect.bisect_left(samples, release, key=lambda s: s.sent)
    attaching = False
    for s in samples[i:]:
        state = s.states.get(identity)
        if state is None or state[1] != "attaching":
            return s.sent if attaching else release
        attaching = True
    return release


def _offered(slices: list[Record], identity: str, at: float) -> bool:
    """Whether, as the record stood at `at`, the newest generation of a fabric pool listed the device untainted."""
    latest: dict[str, Record] = {}
    for r in slices:
        if r.at <= at:
            latest[r.name] = r
    live = [r for r in latest.values() if r.type != "DELETED" and not r.obj.get("nodeName")]
    newest: dict[str, int] = {}
    for r in live:
        newest[r.obj["pool"]] = max(newest.get(r.obj["pool"], 0), int(r.obj.get("generation") or 0))
    return any(
        d.get("identity") == identity and not d.get("taints")
        for r in live
        if int(r.obj.get("generation") or 0) == newest[r.obj["pool"]]
        for d in r.obj["devices"]
    )
