"""The cost of one pod's path to its binding (COST-1..3): scheduling rounds, fabric attaches and time, against the
binding model's minimum, with the timeline a reviewer reads when the path took a detour.

Pure: it reads the claim's allocations (views.py), the claim and pod events (with their etcd revisions) and the fabric
probe's changes (recorder.py) that a scenario observed under fair conditions (suite/implementation/test_path_cost.py:
a device class and node of its own, alone on the implementation), so nothing but the implementation's own choices
can have made the path longer than the minimum.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.versions import PREBIND_POLL_S  # the scheduler re-checks a waiting pod's claim every 5 s
from conformance.observe.attachments import SKEW_S
from conformance.observe.recorder import Record
from conformance.observe.views import Allocation, Binding, Event, device_conditions

# Scheduling rounds (allocations of the claim until its pod binds) each binding model needs at least: keep-in-pool binds
# with its fabric allocation; reschedule-to-local (identified or counted entries) is sent back once and binds with the
# node-local copy; the node-local readiness gate has no fabric and binds with its one allocation.
MIN_ROUNDS = {"keep-in-pool": 1, "reschedule-to-local": 2, "node-local": 1}
# Slack of the time bound: a loaded scheduler and API server (5 s), and per round beyond the first the scheduler's
# retry after the PreBind failure (backoff 1 s, then 2 s) and its cycles to clear and allocate again (5 s).
SLACK_S = 5.0
ROUND_SLACK_S = 5.0
_ON = ("attaching", "attached")


def min_rounds(model: str) -> int:
    return MIN_ROUNDS.get(model, 1)


def time_bound(model: str, attach_s: float) -> float:
    """Allocation-to-binding bound: the promised attach, one PreBind poll, the slack (and one more per extra round)."""
    return attach_s + PREBIND_POLL_S + SLACK_S + (min_rounds(model) - 1) * ROUND_SLACK_S


@dataclass(frozen=True)
class Step:
    """One moment of the path: when (seconds from the first allocation), the etcd revision (None: a probe answer)."""

    at: float
    revision: int | None
    what: str

    def __str__(self) -> str:
        rev = f"r{self.revision}" if self.revision is not None else "probe"
        return f"+{self.at:6.2f}s {rev:>9}  {self.what}"


@dataclass
class PathCost:
    model: str
    node: str
    devices: int  # devices the claim asks for: the minimum of attaches
    rounds: int  # allocations of the claim up to the binding
    attaches: int | None  # attaches the probe saw begin to the node (None: no probe)
    detaches: int | None  # detaches, on the way, of devices attached on the way
    seconds: float | None  # first allocation to binding (None: not bound)
    attach_s: float
    steps: list[Step] = field(default_factory=list)
    refetched: list[str] = field(default_factory=list)  # rounds that went back to a fabric device after a reschedule

    @property
    def min_rounds(self) -> int:
        return min_rounds(self.model)

    @property
    def bound(self) -> float:
        return time_bound(self.model, self.attach_s)

    def timeline(self) -> str:
        return "\n".join(f"  {s}" for s in self.steps) or "  (nothing observed)"

    def rounds_problems(self) -> list[str]:
        out = []
        if self.rounds > self.min_rounds:
            out.append(
                f"{self.rounds} scheduling rounds (allocations of the claim) before the pod bound; binding model "
                f"{self.model} needs {self.min_rounds}"
            )
        out += self.refetched
        return out

    def attach_problems(self) -> list[str]:
        out = []
        if self.attaches is not None and self.attaches > self.devices:
            out.append(
                f"{self.attaches} attaches to {self.node} before the pod bound; its claim asks for {self.devices} "
                f"device(s): one attach each"
            )
        if self.detaches:
            out.append(f"{self.detaches} detach(es), on the way to the binding, of a device attached for this pod")
        return out

    def time_problems(self) -> list[str]:
        if self.seconds is None:
            return ["the pod was not bound"]
        if self.seconds > self.bound:
            return [
                f"{self.seconds:.1f}s from the first allocation to the binding; bound {self.bound:g}s = "
                f"promises.attachSeconds {self.attach_s:g} + one PreBind poll {PREBIND_POLL_S:g} + slack "
                f"{self.bound - self.attach_s - PREBIND_POLL_S:g} (binding model {self.model})"
            ]
        return []

    def as_dict(self) -> dict[str, Any]:
        return {
            "bindingModel": self.model,
            "node": self.node,
            "schedulingRounds": {"measured": self.rounds, "minimum": self.min_rounds},
            "attaches": {"measured": self.attaches, "minimum": self.devices, "detachesOnTheWay": self.detaches},
            "allocationToBindingSeconds": {
                "measured": None if self.seconds is None else round(self.seconds, 2),
                "bound": self.bound,
            },
            "detours": self.rounds_problems() + self.attach_problems() + self.time_problems(),
            "timeline": [str(s) for s in self.steps],
        }


@dataclass
class FabricChanges:
    attached: list[Record] = field(default_factory=list)  # attaches to the node that began in the window
    detached: list[Record] = field(default_factory=list)  # detaches of devices whose attach began in the window
    seen: list[Record] = field(default_factory=list)  # every change of those devices in the window (the timeline)


def fabric_changes(
    records: Iterable[Record], node: str, devices: set[str], whole_node: bool, since: float, until: float
) -> FabricChanges:
    """The attaches to `node` the probe saw begin within [since - SKEW_S, until] (a change to attaching or attached
    from anything else: free, detaching, another node), of `devices` or (whole_node: a node the scenario has alone, and
    entries without identity) of any device; and the detaches of devices whose attach began in that window."""
    out = FabricChanges()
    began: set[str] = set()
    window = [r for r in records if r.kind == "probe" and since - SKEW_S <= r.at <= until]
    for r in sorted(window, key=lambda r: r.at):
        if not (whole_node or r.name in devices):
            continue
        state, before = r.obj["state"], list(r.obj.get("previous") or [])
        was_on = len(before) == 2 and before[0] == node and before[1] in _ON
        if r.obj["node"] == node and state in _ON and not was_on:
            out.attached.append(r)
            began.add(r.name)
        elif was_on and r.name in began and (state not in _ON or r.obj["node"] != node):
            out.detached.append(r)
        if r.name in began or r.name in devices:
            out.seen.append(r)
    return out


def claim_steps(
    events: list[Event], allocations: list[Allocation], binding: Binding | None, start: float
) -> list[Step]:
    """Each allocation and its clearing, and each change of a device's conditions in status.devices, with its
    revision; the pod's binding."""
    steps = []
    for a in allocations:
        steps.append(Step(a.at - start, a.revision, f"claim allocated {_names(a.devices)} on {a.node or '?'}"))
        if a.cleared_revision is not None and a.cleared_at is not None:
            how = "replaced in place" if a.rewritten else "deallocated"
            steps.append(Step(a.cleared_at - start, a.cleared_revision, f"claim {how} ({_names(a.devices)})"))
    seen: dict[tuple[str, str, str], str] = {}
    for e in events:
        if e.kind != "claim" or e.deleted:
            continue
        for entry in (e.obj.get("status") or {}).get("devices") or []:
            result = {k: entry.get(k) for k in ("driver", "pool", "device")}
            for c in device_conditions(e.obj, result):
                key = (entry["pool"], entry["device"], c["type"])
                value = f"{c['status']} ({c.get('reason')})"
                if seen.get(key) != value:
                    seen[key] = value
                    steps.append(
                        Step(
                            e.at - start,
                            e.revision,
                            f"condition {c['type']}={value} on {entry['pool']}/{entry['device']}",
                        )
                    )
    if binding is not None:
        steps.append(Step(binding.at - start, binding.revision, f"pod bound to {binding.node}"))
    return steps


def probe_steps(changes: FabricChanges, start: float) -> list[Step]:
    """Every change of the path's devices the probe saw, the attaches and detaches it counted marked as such."""
    out = []
    for r in changes.seen:
        mark = " (attach)" if r in changes.attached else " (detach)" if r in changes.detached else ""
        was = "/".join(r.obj.get("previous") or []) or "free"
        out.append(Step(r.at - start, None, f"fabric: {r.name} {r.obj['state']} on {r.obj['node']}, was {was}{mark}"))
    return out


def path_cost(
    *,
    model: str,
    node: str,
    devices: int,
    attach_s: float,
    events: list[Event],
    allocations: list[Allocation],
    binding: Binding | None,
    probe: list[Record] | None,
    fabric_devices: set[str],
    whole_node: bool,
    meanings: dict[str, str],
) -> PathCost:
    """The path's cost from the record. `probe`: the probe's changes (None: the profile has no probe);
    `fabric_devices`: the physical devices the scenario's class matches (whole_node: count any device on the node)."""
    upto = [a for a in allocations if binding is None or a.revision <= binding.revision]
    start = upto[0].at if upto else 0.0
    until = binding.at if binding is not None else float("inf")
    cost = PathCost(
        model=model,
        node=node,
        devices=devices,
        rounds=len(upto),
        attaches=None,
        detaches=None,
        seconds=(binding.at - start) if binding is not None and upto else None,
        attach_s=attach_s,
    )
    steps = claim_steps(events, upto, binding, start)
    if probe is not None and upto:
        changes = fabric_changes(probe, node, fabric_devices, whole_node, start, until)
        cost.attaches, cost.detaches = len(changes.attached), len(changes.detached)
        steps += probe_steps(changes, start)
    cost.steps = sorted(steps, key=lambda s: (s.at, s.revision or 0))
    # reschedule-to-local: a round that follows a reschedule must bring the node-local copy; one that lands on a fabric
    # device again was asked for while no node-local copy could be allocated (the reschedule came too early).
    for before, after in itertools.pairwise(upto):
        asked = [f["type"] for f in before.failures if meanings.get(f["type"]) == "reschedule"]
        if asked and any(r.get("bindingConditions") for r in after.results):
            cost.refetched.append(
                f"after {asked} on {_names(before.devices)} (r{before.revision}) the scheduler allocated the fabric "
                f"device(s) {_names(after.devices)} again (r{after.revision}): no node-local copy could be allocated "
                f"when the reschedule was asked for"
            )
    return cost


def _names(devices: list[tuple[str, str]]) -> str:
    return ", ".join(f"{p}/{d}" for p, d in devices)
