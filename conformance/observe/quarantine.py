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

from conformance.observe.attachments import SKEW_S, holdings, stamp
from conformance.observe.recorder import PROBE_PERIOD_S, Record, Sample
from conformance.observe.replay import free_entries, replay
from conformance.observe.slices import reaches

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
    labels = state["node"].get(q.node, {}).get("labels") or {}

    def reaching(s: dict[str, Any]) -> bool:
        spec = {"nodeName": s.get("nodeName"), "allNodes": s.get("where") == "allNodes"}
        return reaches({"spec": spec | {"nodeSelector": s.get("nodeSelector")}}, q.node, labels)

    return free_entries(state, driver, q.identity, reaching)


def _replay(records: list[Record], q: Quarantine, driver: str) -> list[str]:
    found: list[str] = []
    opened: tuple[Record, list[str]] | None = None

    def close(at: float) -> None:
        # Opened and closed by records of two streams: under their skew an offer cannot be told from a lag.
        if opened and at - opened[0].at >= SKEW_S:
            r, entries = opened
            found.append(
                f"offered free from revision {r.revision} ({stamp(r.at)}, {r.kind} {r.name}) for "
                f"{at - r.at:.1f} s: {', '.join(entries)}"
            )

    for r, state in replay((r for r in records if r.at <= q.until), driver, ("slice", "claim", "taintrule", "node")):
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
