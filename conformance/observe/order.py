"""The order of a stack's steps, judged over the whole run-wide record at etcd revisions (issue 41), not at the
scheduler's PreBind polls (every 5 s: a step set right within a few seconds would pass there unseen). Four clauses,
each a tightening of the requirement named (report/catalogue):

- HIDDEN (IMP-4, RDY-5 for node-local): a device is out of offer no later than the failure condition that reports it.
  At the revision of the claim write that first shows a failure condition meaning `failure` True, no entry of that
  physical device may sit in a slice reaching the allocation's node (newest generation), untainted (NoSchedule/
  NoExecute, in the device or by a DeviceTaintRule) and unallocated, the failing claim's own entry counted free (the
  scheduler deallocates it next: hidden "before the deallocation" is too late). A stack may hide it in an earlier
  write, never a later one. A count entry has no identity: its failed device (named by the claim's status) is offered
  only by being given to another entry, so at that revision no other allocated claim's status may name it (IMP-4's
  quarantine judges it from this revision on);
- COPY (IMP-7): a condition meaning `reschedule` on a fabric entry is written only once the node-local copy it points
  to is published: at its revision a slice of the allocation's node lists that physical device. Not judged while
  another claim holds the device (a reschedule then means "in use, try another");
- ATTACHED (IMP-3): binding conditions (and a condition meaning `reschedule`: "attached, reallocate") are True only once
  the device is attached to THAT node: the fabric probe's first answer sent after the watch delivered the write says
  attached there. The answer is the fabric at a moment after the write, so no grace is needed at this end;
- DETACH (IMP-10): a detach begins only after the last pod using the device is gone: where the probe's answers go from
  "attached to N" to anything else, no pod bound on N with the device may still be there one probe period later (the
  pod stream's delivery lag), its use ended by its deletion, its node's, or its claim's release once it is deleting.

Each violation names the claim, the device, the node and the revisions (and times) of both events on its first line.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.observe import copies
from conformance.observe.attachments import (
    SKEW_S,
    Verdicts,
    bound_with,
    data_identity,
    holdings,
    stamp,
    usages,
    use_ends,
)
from conformance.observe.recorder import Record, Sample
from conformance.observe.replay import free_entries, replay
from conformance.observe.slices import allocation_results, reaches
from conformance.observe.steps import FAILURE, READY, RESCHEDULE, Step, node_local_pools, steps

HIDDEN, COPY, ATTACHED, DETACH = "hidden", "copy", "attached", "detach"
KINDS = ("claim", "slice", "taintrule", "node", "pod", "probe")


def _reaching(state: dict[str, dict[str, Any]], node: str) -> Any:
    labels = (state["node"].get(node) or {}).get("labels") or {}

    def where(s: dict[str, Any]) -> bool:
        spec = {"nodeName": s.get("nodeName"), "allNodes": s.get("where") == "allNodes"}
        return reaches({"spec": spec | {"nodeSelector": s.get("nodeSelector")}}, node, labels)

    return where


def _offered(state: dict[str, dict[str, Any]], step: Step, driver: str) -> list[str]:
    """Entries of the step's device free on its node, the failing claim's own entry counted free."""
    assert step.identity is not None and step.node is not None
    others = {k: v for k, v in state["claim"].items() if k != step.claim}
    return free_entries(state | {"claim": others}, driver, step.identity, _reaching(state, step.node))


@dataclass
class _Open:
    step: Step
    entries: list[str]


def _hidden(
    v: Verdicts, records: list[Record], found: list[Step], driver: str, attribute: str, local: set[str]
) -> None:
    failures = []
    for s in found:
        if s.what != FAILURE:
            continue
        if s.identity is None or s.node is None:
            v.skip(HIDDEN, f"{s}: failure {s.conditions} at {s.moment}: device or node not known")
        elif s.pool not in local and _counted(records, driver, s):
            v.count(HIDDEN)
            if other := _assigned_elsewhere(records, s, attribute):
                v.fail(HIDDEN, f"{s}: failure condition {list(s.conditions)} True at {s.moment} while {other}")
        else:
            failures.append(s)
    if not failures:
        return
    by_revision: dict[int, list[Step]] = defaultdict(list)
    for s in failures:
        by_revision[s.revision].append(s)
    opened: list[_Open] = []
    for r, state in replay(records, driver, ("slice", "claim", "taintrule", "node")):
        revision = r.revision or 0
        for o in list(opened):
            if not _offered(state, o.step, driver):
                opened.remove(o)
                v.fail(HIDDEN, _late(o, f"revision {revision} ({stamp(r.at)}, {r.kind} {r.name})"))
        for s in by_revision.pop(revision, []) if r.kind == "claim" else []:
            v.count(HIDDEN)
            if entries := _offered(state, s, driver):
                opened.append(_Open(s, entries))
    for o in opened:
        v.fail(HIDDEN, _late(o, "no revision of the record (still offered at its end)"))
    for s in (s for rest in by_revision.values() for s in rest):
        v.skip(HIDDEN, f"{s}: the failure's write (revision {s.revision}) is not in the replayed record")


def _late(o: _Open, when: str) -> str:
    s = o.step
    return (
        f"{s}: failure condition {list(s.conditions)} True at {s.moment} while the device was still offered "
        f"({', '.join(o.entries)}, free once the scheduler deallocates the claim); out of offer only at {when}"
    )


def _counted(records: list[Record], driver: str, s: Step) -> bool:
    """The step's entry carries no identity attribute in any slice of the record (a count entry)."""
    for r in records:
        if r.kind == "slice" and r.obj.get("driver") == driver and r.obj.get("pool") == s.pool:
            for d in r.obj.get("devices") or []:
                if d["name"] == s.device and "identity" in d:
                    return False
    return True


def _assigned_elsewhere(records: list[Record], s: Step, attribute: str) -> str:
    """A count entry's failed device (named by its status) is only offered by being given to another entry: the
    other claim whose status names it, allocated, as of the failure's revision ("" if none)."""
    latest: dict[str, Record] = {}
    for r in sorted((r for r in records if r.kind == "claim"), key=lambda r: (r.revision or 0, r.seq)):
        if (r.revision or 0) > s.revision:
            break
        latest[(r.obj.get("metadata") or {}).get("uid") or r.name] = r
    for uid, r in latest.items():
        if uid == s.uid or r.type == "DELETED":
            continue
        for x in allocation_results(r.obj):
            if data_identity(r.obj, x, attribute) == s.identity:
                return (
                    f"claim {r.namespace}/{r.name} (revision {r.revision}, {stamp(r.at)}) was already given the "
                    f"device, named in its status ({x['pool']}/{x['device']})"
                )
    return ""


def _contended(held: list[copies.Held], s: Step) -> str:
    """Another claim holding the step's device at its revision (a reschedule then means "in use"), or ""."""
    for h in held:
        if h.uid != s.uid and h.identity == s.identity and h.start <= s.revision < h.end:
            return h.interval()
    return ""


def _copy(v: Verdicts, records: list[Record], found: list[Step], driver: str, local: set[str], held: list) -> None:
    asked = [s for s in found if s.what == RESCHEDULE and s.pool not in local]
    todo: dict[int, list[Step]] = defaultdict(list)
    for s in asked:
        if s.identity is None or s.node is None:
            v.skip(COPY, f"{s}: reschedule {s.conditions} at {s.moment}: device or node not known")
        elif other := _contended(held, s):
            v.skip(COPY, f"{s}: reschedule at {s.moment} while another claim held the device ({other})")
        else:
            todo[s.revision].append(s)
    if not todo:
        return
    waiting: list[Step] = []
    for r, state in replay(records, driver, ("slice", "claim", "taintrule", "node")):
        revision = r.revision or 0
        for s in list(waiting):
            if _copy_on(state, s):
                waiting.remove(s)
                v.fail(COPY, _early_copy(s, f"revision {revision} ({stamp(r.at)}, slice {r.name})"))
        for s in todo.pop(revision, []) if r.kind == "claim" else []:
            v.count(COPY)
            if not _copy_on(state, s):
                waiting.append(s)
    for s in waiting:
        v.fail(COPY, _early_copy(s, "no revision of the record"))


def _copy_on(state: dict[str, dict[str, Any]], s: Step) -> bool:
    return any(
        sl.get("nodeName") == s.node and any(d.get("identity") == s.identity for d in sl.get("devices") or [])
        for sl in state["slice"].values()
    )


def _early_copy(s: Step, when: str) -> str:
    return (
        f"{s}: condition meaning reschedule {list(s.conditions)} True at {s.moment} before the node-local copy it "
        f"points to was published on {s.node}: a slice of {s.node} listed {s.identity} first at {when}"
    )


def early_answer(
    samples: list[Sample], at: float, identity: str, node: str, sent: list[float] | None = None
) -> int | None:
    """The index in `samples` of the probe's first answer sent after a condition write delivered at `at`, where that
    answer says `identity` is NOT attached to `node` (the condition came first), or None: attached there, no answer
    yet, or a late delivery. `sent`: the answers' send times (bisected). Shared by IMP-3's run-wide clause and the
    scenarios' own check (outcome.early_conditions), so both judge one write alike."""
    i = bisect.bisect_left(sent if sent is not None else [x.sent for x in samples], at)
    if i >= len(samples):
        return None
    said = samples[i].states.get(identity)
    if said == (node, "attached"):
        return None
    before = samples[i - 1] if i else None
    if (
        before is not None
        and at - before.received <= SKEW_S
        and before.states.get(identity) == (node, "attached")
        and said in (None, (node, "detaching"))
    ):
        # Attached in the answer before the write's delivery, leaving in the one after: the claim stream delivered
        # the write late (a pod bound on it and deleted at once, a stack that detaches at once), not early.
        return None
    return i


def attach_problem(s: Step, samples: list[Sample], sent: list[float] | None = None) -> str | None:
    """Why the step's conditions were True before its device was attached to its node (the probe's first answer sent
    after the write was delivered says otherwise), or None. `sent`: the answers' send times (bisected)."""
    assert s.identity is not None and s.node is not None
    i = early_answer(samples, s.at, s.identity, s.node, sent)
    if i is None:
        return None
    said = samples[i].states.get(s.identity)
    later = next((x for x in samples[i:] if x.states.get(s.identity) == (s.node, "attached")), None)
    first = (
        f"attached on {s.node} first in the answer sent {stamp(later.sent)} ({later.sent - s.at:+.2f} s)"
        if later
        else f"never attached on {s.node} in a later answer"
    )
    return (
        f"{s}: {list(s.conditions)} True at {s.moment} before the device was attached there: the probe's first "
        f"answer after it (sent {stamp(samples[i].sent)}) says {said[1] + ' on ' + said[0] if said else 'free'}; "
        f"{first}"
    )


def _attached(v: Verdicts, found: list[Step], samples: list[Sample], fabric: set[str], held: list) -> None:
    sent = [s.sent for s in samples]
    for s in found:
        if s.what == FAILURE or (s.identity is not None and s.identity not in fabric):
            continue  # a node-local device: no fabric to ask
        if s.identity is None or s.node is None:
            v.skip(ATTACHED, f"{s}: {s.conditions} True at {s.moment}: device or node not known")
            continue
        if s.what == RESCHEDULE and (other := _contended(held, s)):
            v.skip(ATTACHED, f"{s}: reschedule at {s.moment} while another claim held the device ({other})")
            continue
        if bisect.bisect_left(sent, s.at) >= len(samples):
            v.skip(ATTACHED, f"{s}: {s.conditions} True at {s.moment}: no probe answer sent after it")
            continue
        v.count(ATTACHED)
        if problem := attach_problem(s, samples, sent):
            v.fail(ATTACHED, problem)


def _detach(v: Verdicts, records: list[Record], samples: list[Sample], driver: str, attribute: str, ids: dict) -> None:
    held: dict[str, list[Any]] = defaultdict(list)  # identity -> its holdings
    for h in holdings(records, driver, attribute, ids):
        if h.identity is not None:
            held[h.identity].append(h)
    used: dict[str, list[Any]] = defaultdict(list)  # claim -> the pods bound with it
    for u in usages(records):
        for claim in u.claims:
            used[claim].append(u)
    gone_rev = {f"{r.namespace}/{r.name}": r.revision for r in records if r.kind == "pod" and r.type == "DELETED"}
    last: dict[str, tuple[Sample, tuple[str, str]]] = {}
    for x in samples:
        for identity in set(last) | set(x.states):
            before = last.get(identity)
            now = x.states.get(identity)
            if before is not None and before[1][1] == "attached" and now != before[1]:
                _judge_detach(v, identity, before[1][0], before[0], x, now, held, used, gone_rev)
            if now is None:
                last.pop(identity, None)
            else:
                last[identity] = (x, now)


def _judge_detach(
    v: Verdicts,
    identity: str,
    node: str,
    before: Sample,
    after: Sample,
    now: tuple[str, str] | None,
    held: dict[str, list[Any]],
    used: dict[str, list[Any]],
    gone_rev: dict[str, int | None],
) -> None:
    users = []
    for h in held.get(identity, []):
        if h.node not in (None, node):
            continue
        for u in used.get(h.claim, []):
            if u.node == node and u.bound < after.sent and bound_with(h, u, SKEW_S):
                users.append((u, h))
    if not users:
        return
    v.count(DETACH)
    for u, h in users:
        known = {t: why for why, t in use_ends(u, h).items()}
        end = min(known) if known else None
        if end is not None and end - SKEW_S <= after.received:  # the end is as delivered: its stream may lag it
            continue
        said = f"{now[1]} on {now[0]}" if now else "free"
        gone = "still there when the record ended"
        if end is not None:
            revision = f" at revision {gone_rev[u.pod]}" if known[end] == "deleted" and gone_rev.get(u.pod) else ""
            gone = f"{known[end]} only{revision} ({stamp(end)}, {end - after.received:.2f} s later)"
        v.fail(
            DETACH,
            f"claim {h.claim} device {h.pool}/{h.device} ({identity}) on {node}: detach began by "
            f"{stamp(after.received)} (the probe's answer sent {stamp(after.sent)} says {said}; the one sent "
            f"{stamp(before.sent)} said attached) while pod {u.pod}, bound at revision {u.revision}, used it: {gone}",
        )
        return  # one pod is the evidence


@dataclass
class Order:
    """What the four clauses found (Verdicts keyed by clause) and the steps they read."""

    verdicts: Verdicts
    steps: list[Step]


def judge(
    records: Iterable[Record],
    samples: list[Sample],
    driver: str,
    attribute: str,
    identities: dict[tuple[str, str], str],
    meanings: dict[str, str],
) -> Order:
    """The four clauses over the record (every claim of every scenario) and the probe's answers (none: the clauses
    that need the fabric, ATTACHED and DETACH, judge nothing)."""
    records = [r for r in records if r.kind in KINDS]
    published = {
        (r.obj["pool"], d["name"]): d["identity"]
        for r in records
        if r.kind == "slice"
        for d in r.obj.get("devices") or []
        if "identity" in d
    }
    identities = published | identities
    found = steps(records, driver, attribute, identities, meanings)
    local = node_local_pools(records, driver)
    held, _ = copies.identify(records, driver, attribute, identities)
    v = Verdicts()
    _hidden(v, records, found, driver, attribute, local)
    _copy(v, records, found, driver, local, held)
    if samples:
        fabric = {i for x in samples for i in x.states}
        fabric |= {s.identity for s in found if s.identity and s.pool not in local}
        _attached(v, [s for s in found if s.what in (READY, RESCHEDULE)], samples, fabric, held)
        _detach(v, records, samples, driver, attribute, identities)
    return Order(v, found)
