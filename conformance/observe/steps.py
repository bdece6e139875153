"""The steps a stack took on each allocated device, read from the run-wide record in etcd revision order: the first
claim write of an allocation that shows a failure condition meaning `failure` True, one meaning `reschedule` True, and
all its binding conditions True; and the pods that used each device (the order clauses of order.py and the reuse
judgement of reuse.py read them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.observe.attachments import data_identity, stamp
from conformance.observe.recorder import Record
from conformance.observe.slices import allocation_results, device_conditions, result_key

FAILURE, RESCHEDULE, READY = "failure", "reschedule", "ready"


@dataclass(frozen=True)
class Step:
    """One claim write that first showed a step of one allocated device."""

    what: str  # FAILURE, RESCHEDULE or READY
    claim: str  # namespace/name
    uid: str
    allocated: int  # revision of the write that allocated it (the allocation this step belongs to)
    pool: str
    device: str
    identity: str | None  # the physical device: identity attribute of the entry, else the claim's status data
    node: str | None  # the node the allocation pins (bindsToNode, node-local), None if not exactly one
    conditions: tuple[str, ...]  # the condition types that made the step
    revision: int
    at: float  # when the record received the write

    @property
    def moment(self) -> str:
        return f"revision {self.revision} ({stamp(self.at)})"

    def __str__(self) -> str:
        return f"claim {self.claim} device {self.pool}/{self.device} ({self.identity or 'unidentified'}) on {self.node}"


def allocation_node(allocation: dict[str, Any]) -> str | None:
    """The one node an allocation pins (matchFields metadata.name In [node]), else None."""
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    names = {
        v
        for t in terms
        for f in t.get("matchFields") or []
        if f.get("key") == "metadata.name" and f.get("operator", "In") == "In"
        for v in f.get("values") or []
    }
    return next(iter(names)) if len(names) == 1 else None


def steps(
    records: Iterable[Record],
    driver: str,
    attribute: str,
    identities: dict[tuple[str, str], str],
    meanings: dict[str, str],
) -> list[Step]:
    """Every step of every allocated device of `driver` in the record, in revision order. `meanings`: failure
    condition type -> failure | reschedule (the profile's failureConditions; an undeclared one means failure)."""
    out: list[Step] = []
    seen: set[tuple[str, int, tuple[str, str, str], str]] = set()
    allocated: dict[str, tuple[Any, int]] = {}  # claim uid -> (allocation key, revision that allocated it)
    for r in sorted((r for r in records if r.kind == "claim"), key=lambda r: (r.revision or 0, r.seq)):
        uid = (r.obj.get("metadata") or {}).get("uid") or f"{r.namespace}/{r.name}"
        allocation = None if r.type == "DELETED" else (r.obj.get("status") or {}).get("allocation")
        if not allocation:
            allocated.pop(uid, None)
            continue
        results = [x for x in allocation_results(r.obj) if x["driver"] == driver]
        key = (allocation.get("allocationTimestamp"), tuple(result_key(x) for x in results))
        if uid not in allocated or allocated[uid][0] != key:
            allocated[uid] = (key, r.revision or 0)
        since = allocated[uid][1]
        node = allocation_node(allocation)
        for x in results:
            states = device_conditions(r.obj, x)
            failing = [t for t in x.get("bindingFailureConditions") or [] if states.get(t) == "True"]
            found = {
                FAILURE: tuple(t for t in failing if meanings.get(t, FAILURE) == FAILURE),
                RESCHEDULE: tuple(t for t in failing if meanings.get(t) == RESCHEDULE),
                READY: tuple(x.get("bindingConditions") or ()),
            }
            if not all(states.get(t) == "True" for t in found[READY]):
                found[READY] = ()
            for what, conditions in found.items():
                mark = (uid, since, result_key(x), what)
                if not conditions or mark in seen:
                    continue
                seen.add(mark)
                identity = identities.get((x["pool"], x["device"])) or data_identity(r.obj, x, attribute)
                claim = f"{r.namespace}/{r.name}"
                out.append(
                    Step(
                        what,
                        claim,
                        uid,
                        since,
                        x["pool"],
                        x["device"],
                        identity,
                        node,
                        conditions,
                        r.revision or 0,
                        r.at,
                    )
                )
    return out


def node_local_pools(records: Iterable[Record], driver: str) -> set[str]:
    """Pools of `driver` published by slices of one node (nodeName): node-local devices and hot-plugged copies."""
    return {
        r.obj["pool"] for r in records if r.kind == "slice" and r.obj.get("driver") == driver and r.obj.get("nodeName")
    }
