"""IMP-4 judged at every moment of the run's record: a device whose attach failed stays out of reach.

From the claim write that showed a failure condition (meaning failure) True until the suite cleared the fault, the
failed physical device, on the node where its attach failed, is
- never offered free: at no etcd revision does an entry carrying its identity sit in a slice (of its pool's newest
  generation) that reaches that node, unallocated and untainted (NoSchedule/NoExecute, in the device or by a
  DeviceTaintRule). Slices, claims and taint rules share etcd's revisions, so replaying them in revision order is
  exact; an offer that lasted less than one probe period (by the record's clock) is excused as stream skew;
- never allocated again to a claim bound to that node (its identity from the slices, or for a count entry from the
  device the claim's status names);
- never attaching, attached or detaching on that node in any probe answer sent one probe period after the failure
  showed: a count entry has no identity, the fabric's probe does.

The KEP lets a stack hide a failed device by removing it, tainting it or narrowing its node selector: the last one
makes it unreachable from the failed node only, so each rule is about that node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.observe.attachments import holdings, stamp
from conformance.observe.recorder import PROBE_PERIOD_S, Record, Sample
from conformance.observe.slices import allocation_results, reaches, tainted_by_rule

HIDING = ("NoSchedule", "NoExecute")
ON_FABRIC = ("attaching", "attached", "detaching")


@dataclass(frozen=True)
class Quarantine:
    identity: str  # the failed physical device, as the probe names it
    node: str  # where its attach failed
    revision: int  # the claim write that first showed the failure condition True
    at: float  # when the record received that write
    until: float  # when the suite cleared the fault (time.time())

    def __str__(self) -> str:
        return (
            f"{self.identity} failed on {self.node}: quarantine from revision {self.revision} ({stamp(self.at)}) "
            f"until the fault was cleared ({stamp(self.until)})"
        )


def _offers(state: dict[str, dict[str, Any]], q: Quarantine, driver: str) -> list[str]:
    """'slice:device' of every entry offering the failed device free on its node in this state of the cluster."""
    slices = [s for s in state["slice"].values() if s.get("driver") == driver]
    newest: dict[str, int] = {}
    for s in slices:
        newest[s["pool"]] = max(newest.get(s["pool"], 0), int(s.get("generation") or 0))
    allocated = {entry for entries in state["claim"].values() for entry in entries}
    rules = list(state["taintrule"].values())
    labels = state["node"].get(q.node, {}).get("labels") or {}
    out = []
    for name, s in state["slice"].items():
        if s.get("driver") != driver or int(s.get("generation") or 0) != newest[s["pool"]]:
            continue
        spec = {"nodeName": s.get("nodeName"), "allNodes": s.get("where") == "allNodes"}
        if not reaches({"spec": spec | {"nodeSelector": s.get("nodeSelector")}}, q.node, labels):
            continue
        for d in s.get("devices") or []:
            if d.get("identity") != q.identity or (s["pool"], d["name"]) in allocated:
                continue
            if any(t.get("effect") in HIDING for t in d.get("taints") or []):
                continue
            if tainted_by_rule(rules, driver, s["pool"], d["name"]):
                continue
            out.append(f"{name}:{d['name']}")
    return out


def _replay(records: list[Record], q: Quarantine, driver: str) -> list[str]:
    state: dict[str, dict[str, Any]] = {"slice": {}, "claim": {}, "taintrule": {}, "node": {}}
    found: list[str] = []
    opened: tuple[Record, list[str]] | None = None

    def close(at: float) -> None:
        if opened and at - opened[0].at >= PROBE_PERIOD_S:
            r, entries = opened
            found.append(
                f"offered free from revision {r.revision} ({stamp(r.at)}, {r.kind} {r.name}) for "
                f"{at - r.at:.1f} s: {', '.join(entries)}"
            )

    kinds = tuple(state)
    for r in sorted(
        (r for r in records if r.kind in kinds and r.at <= q.until), key=lambda r: (r.revision or 0, r.seq)
    ):
        key = f"{r.namespace}/{r.name}" if r.namespace else r.name
        if r.type == "DELETED":
            state[r.kind].pop(key, None)
        elif r.kind == "claim":
            state["claim"][key] = [(x["pool"], x["device"]) for x in allocation_results(r.obj) if x["driver"] == driver]
        else:
            state[r.kind][key] = r.obj
        if (r.revision or 0) <= q.revision:
            continue
        now = _offers(state, q, driver)
        if now and opened is None:
            opened = (r, now)
        elif not now and opened is not None:
            close(r.at)
            opened = None
    close(q.until)
    return found


def judge(
    records: Iterable[Record],
    samples: Iterable[Sample],
    q: Quarantine,
    driver: str,
    attribute: str,
    identities: dict[tuple[str, str], str],
) -> list[str]:
    """Every way the failed device came back within the quarantine, each with its moment and objects."""
    records = list(records)
    found = _replay(records, q, driver)
    for h in holdings(records, driver, attribute, identities):
        if h.revision > q.revision and h.start <= q.until and h.identity == q.identity and h.node in (q.node, None):
            found.append(f"allocated again at revision {h.revision} ({stamp(h.start)}): {h}")
    for s in samples:
        where = s.states.get(q.identity)
        if q.at + PROBE_PERIOD_S <= s.sent <= q.until and where and where[0] == q.node and where[1] in ON_FABRIC:
            found.append(f"{where[1]} on {q.node} again in the probe's answer sent {stamp(s.sent)}")
            break  # the first is the evidence; the following answers say the same
    return found
