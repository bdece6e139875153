"""What the run-wide record says happened to a scenario's claims, in one line each: the cause a failed wait's
message leads with (suite/cause.py), instead of the wait's symptom.

"claim NS/NAME allocated 3 times on node-1, each cleared by the binding timeout after 20.2 s; binding condition
FabricDeviceReady never written (status.devices written by nobody)": how often it was allocated and where, what
cleared each allocation (the binding timeout, a failure condition, or nothing yet), which binding conditions were never
written or never True, and who wrote status.devices last and when (the claim's managedFields). A claim never allocated
says why its pod was not scheduled (PodScheduled, the scheduler's events). Pure logic over the record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conformance.observe.recorder import Record, Recorder
from conformance.observe.views import Allocation, History, device_conditions

SCHEDULER = "kube-scheduler"
# An allocation cleared this close to allocationTimestamp + bindingTimeout, with no failure condition True, was cleared
# by the binding timeout (the scheduler's PreBind polls every 5 s, the watch delivers late on a loaded machine).
TIMEOUT_SLACK_S = 1.0


@dataclass
class ClaimStory:
    namespace: str
    name: str
    allocations: list[Allocation] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)  # per allocation: what cleared it
    timeouts: list[float] = field(default_factory=list)  # seconds each allocation stood before the binding timeout
    wanted: list[str] = field(default_factory=list)  # binding conditions of its allocations, in order
    written: dict[str, str] = field(default_factory=dict)  # condition type -> its last status (and reason)
    true: set[str] = field(default_factory=set)  # condition types seen True
    writers: dict[str, str] = field(default_factory=dict)  # manager of status.devices -> its last write (UTC clock)
    unscheduled: str = ""  # never allocated: why its pod was not scheduled

    @property
    def never_written(self) -> list[str]:
        return [t for t in self.wanted if t not in self.written]

    @property
    def never_true(self) -> list[str]:
        return [t for t in self.wanted if t in self.written and t not in self.true]

    @property
    def troubled(self) -> bool:
        """A claim a failure is likely about: never allocated, cleared, or with a binding condition never True."""
        return not self.allocations or len(self.allocations) > 1 or bool(self.never_written or self.never_true)

    def text(self) -> str:
        claim = f"claim {self.namespace}/{self.name}"
        if not self.allocations:
            return f"{claim} never allocated" + (f": {self.unscheduled}" if self.unscheduled else "")
        nodes = sorted({a.node or "no single node" for a in self.allocations})
        times = "once" if len(self.allocations) == 1 else f"{len(self.allocations)} times"
        parts = [f"{claim} allocated {times} on {', '.join(nodes)}{self._ends()}"]
        if never := self.never_written:
            parts.append(f"binding condition{'s' * (len(never) > 1)} {', '.join(never)} never written")
        if false := self.never_true:
            parts.append("; ".join(f"{t} written {self.written[t]}, never True" for t in false))
        parts.append(self._writers())
        return "; ".join(parts)

    def _ends(self) -> str:
        cleared = [a for a in self.allocations if a.cleared_at is not None]
        if self.timeouts and len(self.timeouts) == len(cleared):
            after = f"cleared by the binding timeout after {_span(self.timeouts)}"
            if len(cleared) == len(self.allocations):
                return f", {'each ' if len(cleared) > 1 else ''}{after}"
            if len(cleared) == len(self.allocations) - 1:
                which = "the first" if len(cleared) == 1 else f"the first {len(cleared)}"
                return f", {which} {after}, the last still allocated"
        shown = [e for e in self.ends if e]
        return f" ({'; '.join(shown)})" if shown else ""

    def _writers(self) -> str:
        if not self.writers:
            return "status.devices written by nobody"
        manager, at = max(self.writers.items(), key=lambda kv: kv[1])
        others = sorted(set(self.writers) - {manager})
        return f"status.devices last written by {manager} at {at} UTC" + (
            f" (also by {', '.join(others)})" if others else ""
        )


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f} s" if high - low < 0.5 else f"{low:.1f}-{high:.1f} s"


def stories(record: Recorder, namespaces: Iterable[str], binding_timeout_s: float) -> list[ClaimStory]:
    """Every claim of the namespaces, troubled ones first (never allocated, cleared, a condition never True)."""
    out = []
    for ns in sorted(namespaces):
        history = History(_Snapshot(record.select(("claim", "pod", "event"), namespace=ns)), ns)  # type: ignore[arg-type]
        names = list(dict.fromkeys(e.name for e in history.events("claim")))
        for name in names:
            out.append(story(history, name, binding_timeout_s))
    return sorted(out, key=lambda s: not s.troubled)


@dataclass
class _Snapshot:
    """One namespace's records, read from the record once (a History reads them again for every claim)."""

    records: list[Record]

    def select(
        self, kinds: tuple[str, ...] = (), since: float = 0.0, until: float | None = None, namespace: str | None = None
    ) -> list[Record]:
        return [
            r
            for r in self.records
            if (not kinds or r.kind in kinds)
            and r.at >= since
            and (until is None or r.at <= until)
            and (namespace is None or r.namespace == namespace)
        ]


def story(history: History, name: str, binding_timeout_s: float) -> ClaimStory:
    found = ClaimStory(history.namespace, name, history.allocations(name))
    events = [e for e in history.events("claim") if e.name == name and not e.deleted]
    for a in found.allocations:
        for r in a.results:
            for t in r.get("bindingConditions") or []:
                if t not in found.wanted:
                    found.wanted.append(t)
        found.ends.append(_end(a, binding_timeout_s, found.timeouts))
        found.true |= {t for (_, _, t) in a.true_at}
    for e in events:
        allocation = (e.obj.get("status") or {}).get("allocation")
        for r in (allocation or {}).get("devices", {}).get("results") or []:
            for c in device_conditions(e.obj, r):
                reason = f" ({c['reason']})" if c.get("reason") else ""
                found.written[c["type"]] = f"{c.get('status')}{reason}"
        found.writers.update(_device_writers(e.obj))
    if not found.allocations:
        found.unscheduled = _unscheduled(history)
    return found


def _end(a: Allocation, binding_timeout_s: float, timeouts: list[float]) -> str:
    if a.cleared_at is None:
        return ""
    stood = a.cleared_at - _allocated_at(a)
    if a.failures:
        f = a.failures[0]
        return f"cleared after {f['type']}=True ({f.get('reason') or 'no reason'}) at {stood:.1f} s"
    if a.rewritten:
        return f"rewritten in place after {stood:.1f} s"
    if stood >= binding_timeout_s - TIMEOUT_SLACK_S:
        timeouts.append(stood)
        return f"cleared by the binding timeout after {stood:.1f} s"
    return f"cleared after {stood:.1f} s with no failure condition True"


def _allocated_at(a: Allocation) -> float:
    """When the scheduler allocated: allocationTimestamp (the binding timeout counts from it), else the watch's."""
    stamp = a.allocation.get("allocationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() if stamp else a.at
    except ValueError:
        return a.at


def _device_writers(claim: dict[str, Any]) -> dict[str, str]:
    """Managers that own fields of status.devices (managedFields of the status subresource), with their last write."""
    out = {}
    for m in (claim.get("metadata") or {}).get("managedFields") or []:
        status = ((m.get("fieldsV1") or {}).get("f:status")) or {}
        if m.get("subresource") == "status" and "f:devices" in status and m.get("manager"):
            out[m["manager"]] = str(m.get("time") or "").replace("T", " ").removesuffix("Z")[-8:]
    return out


def _unscheduled(history: History) -> str:
    """Why the namespace's pods were not scheduled: the last PodScheduled=False message, or the scheduler's event."""
    for e in reversed(history.events("pod")):
        for c in (e.obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                return f"pod {e.name}: {c.get('reason')}: {c['message']}"
    for ev in history.k8s_events():
        if ev.get("reason") == "FailedScheduling":
            return f"{ev.get('reason')}: {ev.get('message')}"
    return "its pod was never considered by the scheduler" if history.events("pod") else "no pod of it was recorded"


def lead(found: list[ClaimStory]) -> str:
    """The story a failure's first line tells: the first troubled claim's, and how many more there are."""
    troubled = [s for s in found if s.troubled]
    if not troubled:
        return ""
    more = f" (and {len(troubled) - 1} more claims like it)" if len(troubled) > 1 else ""
    return troubled[0].text() + more
