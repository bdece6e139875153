"""The cluster's state at one etcd revision, as a replay of the record rebuilds it (slices as summaries, claims as the
(pool, device) entries of the driver they hold, DeviceTaintRules whole): which entries of a physical device are free."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from conformance.observe.recorder import Record
from conformance.observe.slices import allocation_results, tainted_by_rule

HIDING = ("NoSchedule", "NoExecute")  # taint effects that keep the scheduler from allocating a device


def free_entries(
    state: dict[str, dict[str, Any]], driver: str, identity: str, where: Callable[[dict[str, Any]], bool] | None = None
) -> list[str]:
    """'slice:device' of every entry of `identity` the scheduler could allocate in this state: in its pool's newest
    generation, not allocated, not tainted NoSchedule/NoExecute in the device or by a rule; `where`: only slices (as
    summaries) it accepts (e.g. those reaching one node)."""
    slices = [s for s in state["slice"].values() if s.get("driver") == driver]
    newest: dict[str, int] = {}
    for s in slices:
        newest[s["pool"]] = max(newest.get(s["pool"], 0), int(s.get("generation") or 0))
    allocated = {entry for entries in state["claim"].values() for entry in entries}
    rules = list(state["taintrule"].values())
    out = []
    for name, s in state["slice"].items():
        if s.get("driver") != driver or int(s.get("generation") or 0) != newest[s["pool"]]:
            continue
        if where is not None and not where(s):
            continue
        for d in s.get("devices") or []:
            if d.get("identity") != identity or (s["pool"], d["name"]) in allocated:
                continue
            if any(t.get("effect") in HIDING for t in d.get("taints") or []):
                continue
            if not tainted_by_rule(rules, driver, s["pool"], d["name"]):
                out.append(f"{name}:{d['name']}")
    return out


def replay(
    records: Iterable[Record], driver: str, kinds: tuple[str, ...] = ("slice", "claim", "taintrule")
) -> Iterator[tuple[Record, dict[str, dict[str, Any]]]]:
    """The records of `kinds` in etcd revision order, each with the state of the cluster once it is applied (the same
    dict, changed in place: read it before the next step)."""
    state: dict[str, dict[str, Any]] = {kind: {} for kind in kinds}
    for r in sorted((r for r in records if r.kind in kinds), key=lambda r: (r.revision or 0, r.seq)):
        key = f"{r.namespace}/{r.name}" if r.namespace else r.name
        if r.type == "DELETED":
            state[r.kind].pop(key, None)
        elif r.kind == "claim":
            state["claim"][key] = [(x["pool"], x["device"]) for x in allocation_results(r.obj) if x["driver"] == driver]
        else:
            state[r.kind][key] = r.obj
        yield r, state
