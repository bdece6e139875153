"""Implementation scenarios judge outcomes, not the path one design takes.

The outcome every binding model owes: the pod ends bound on node N using devices the fabric probe reports attached
to N. Two paths lead there, and either is judged the same way:
- "fabric": the pod binds with its fabric allocation (keep-in-pool: the first one);
- "local": a failure condition that the profile declares to mean `reschedule` sends the fabric allocation back to
  the scheduler, which clears it and allocates the node-local copy of the same physical device on N
  (reschedule-to-local). That condition on the way is the happy path, not a failure.
Never allowed on either path: an allocation edited in place (a claim's allocation replaced without being cleared),
a device held or offered twice (the session's invariant watcher fails the scenario), a detour through a condition
that means `failure` or through the binding timeout (an allocation cleared with no reschedule condition True).

Physical identity: from the leased devices' copies, else from any slice that ever published the copy (the watcher
keeps them); a counted fabric entry has none, and the device it became is the node-local copy's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from conformance.implementation.profile import Profile
from conformance.observe.order import early_answer
from conformance.observe.recorder import Recorder, States
from conformance.observe.slices import BIND_SLACK_S
from conformance.observe.views import Allocation, Binding, History
from conformance.suite.implementation.context import Context

# The probe answers before a condition's delivery read with it: the one that ends within SKEW_S of the delivery
# (order.early_answer's late-delivery allowance) was sent well inside this.
LOOKBACK_S = 10.0

Path = Literal["fabric", "local", "none"]


def bind_timeout(profile: Profile, extra: float = 0.0) -> float:
    """How long a pod may take to bind: the promised attach and the scheduler's slack, twice for reschedule-to-local
    (a second scheduling round after the reschedule)."""
    rounds = 2 if profile.binding_model == "reschedule-to-local" else 1
    return rounds * (profile.promises.attach_s + BIND_SLACK_S) + extra


@dataclass
class Outcome:
    node: str  # the node the pod was pinned to
    model: str  # the profile's binding model
    binding: Binding | None
    allocations: list[Allocation]
    final: Allocation | None  # the allocation the pod was bound with
    identity: dict[tuple[str, str], str | None]  # (pool, device) -> physical identity, every copy allocated
    local_node: dict[tuple[str, str], str | None]  # (pool, device) -> node of its node-local slice ("": none)
    meanings: dict[str, str]  # condition type -> reschedule | failure, from the profile
    probed: bool = False  # the profile has a fabric probe
    at_bind: States | None = None  # the probe's first answer after the binding was seen
    early: list[str] = field(default_factory=list)  # IMP-3: conditions seen True before the fabric said attached
    judged: int = 0  # IMP-3: conditions compared with the probe (none: nothing was observed)
    unidentified: list[str] = field(default_factory=list)  # copies whose physical device cannot be known
    # (allocation revision, pool, device) -> the device status.devices[].data names for it in that allocation (a count
    # entry's device where the stack writes it there; entry names are reused by later allocations, so per allocation)
    data: dict[tuple[int, str, str], str] = field(default_factory=dict)
    lag: str | None = None  # the claim stream had not delivered up to the binding when this was read (views.CATCH_UP_S)

    def identity_in(self, allocation: Allocation, device: tuple[str, str]) -> str | None:
        """The physical device behind `device` in `allocation`: from the slices, else from that allocation's data."""
        return self.identity.get(device) or self.data.get((allocation.revision, *device))

    @property
    def path(self) -> Path:
        if self.final is None:
            return "none"
        return "fabric" if all(r.get("bindingConditions") for r in self.final.results) else "local"

    def final_identities(self) -> list[str | None]:
        return [self._identity_of_final(d) for d in self.final.devices] if self.final else []

    def _identity_of_final(self, device: tuple[str, str]) -> str | None:
        return self.identity_in(self.final, device) if self.final else self.identity.get(device)

    def detours(self, *, timeouts: bool = True, failed: int | None = None, failures: bool = False) -> list[str]:
        """Allocations cleared on the way to the final one that the happy path does not allow: edited in place,
        cleared by a condition that means failure (unless failures=True: a scenario's staging pods, whose failure
        path other requirements judge), and (timeouts=False) cleared by the binding timeout. A timeout is
        tolerated by default: scenarios run side by side with IMP-8's controller restart, which may delay another
        scenario's conditions past the suite's short bindingTimeout; the pod must still end where its device is."""
        out = []
        for a in self.allocations:
            if a is self.final or a.cleared_revision is None or a.revision == failed:  # `failed`: the scenario's
                continue
            if a.rewritten:
                out.append(f"allocation {a.devices} (revision {a.revision}) was edited in place")
                continue
            meanings = {f["type"]: self.meanings.get(f["type"], "failure") for f in a.failures}
            lasted = f"{(a.cleared_at or a.at) - a.at:.1f}s"
            if not meanings and not timeouts:
                out.append(
                    f"allocation {a.devices} was cleared after {lasted} with no failure condition True (timeout)"
                )
            elif meanings and "reschedule" not in meanings.values() and not failures:
                out.append(f"allocation {a.devices} failed after {lasted}: {sorted(meanings)} (meaning failure)")
        return out

    def rescheduled(self) -> list[Allocation]:
        """Allocations cleared after a condition that the profile declares to mean reschedule was True."""
        return [a for a in self.allocations if any(self.meanings.get(f["type"]) == "reschedule" for f in a.failures)]

    def describe(self) -> str:
        # A node-local readiness gate's devices carry the conditions on their node: no fabric to name.
        path = self.path
        if self.model == "node-local" and path == "fabric":
            path = "node-local with binding conditions"
        lines = [f"pinned to {self.node}, binding model {self.model}, path {path}"]
        start = self.allocations[0].at if self.allocations else 0.0
        for a in self.allocations:
            failures = [f"{f['type']} ({f.get('reason')})" for f in a.failures]
            cleared = f", cleared r{a.cleared_revision} at +{(a.cleared_at or 0) - start:.1f}s" if a.cleared_at else ""
            cleared += " (in place)" if a.rewritten else ""
            failed = f", True failure conditions {failures}" if failures else ""
            lines.append(f"allocation r{a.revision} at +{a.at - start:.1f}s {a.devices} on {a.node}{cleared}{failed}")
        if self.binding:
            b = self.binding
            lines.append(f"bound r{b.revision} at +{b.at - start:.1f}s on {b.node}, claim {b.claim_state}")
        else:
            lines.append("not bound")
        if self.lag:
            said = "read without the claim stream caught up with the binding (lagging, or no claim written since)"
            lines.append(f"{said}: {self.lag}")
        return "\n  ".join(lines)

    # --- the requirements -----------------------------------------------------------------------------------

    def binding_problems(
        self, *, timeouts: bool = True, failed: int | None = None, failures: bool = False
    ) -> list[str]:
        """IMP-2 (and the start of IMP-7/IMP-8): bound on the node, with devices the fabric says are attached
        there, reached by an allowed path (`failed`: the revision of an allocation the scenario made fail;
        `failures`: a detour through a failure condition tolerated, see detours)."""
        if self.binding is None or self.final is None:
            return [f"the pod was not bound:\n  {self.describe()}"]
        problems = []
        if self.binding.node != self.node:
            problems.append(f"bound to {self.binding.node}, pinned to {self.node}")
        results = self.final.results
        for device, ident, result in zip(self.final.devices, self.final_identities(), results, strict=True):
            where = self.local_node.get(device)
            # Judged per device: a claim of several may end with some node-local copies and some fabric devices.
            if not result.get("bindingConditions") and where != self.binding.node:
                problems.append(f"{device} is not a node-local copy on {self.binding.node} (its slice: {where!r})")
            if ident is None:
                problems.append(f"{device}: no physical identity was ever published for it")
                continue
            seen = (self.at_bind or {}).get(ident)
            if seen != (self.binding.node, "attached"):
                said = f"the fabric says {seen}, pod on {self.binding.node}"
                problems.append(f"{device} ({ident}) at the binding: {said}")
        problems += self.detours(timeouts=timeouts, failed=failed, failures=failures)
        if self.path == "local":
            problems += self._same_physical_device()
        return problems

    def placement_problems(self) -> list[str]:
        """bindingModel node-local (no fabric to ask what is attached): bound on the pinned node with devices of that
        node's own slices, reached without a detour (an allocation edited in place or failed on the way)."""
        if self.binding is None or self.final is None:
            return [f"the pod was not bound:\n  {self.describe()}"]
        problems = [f"bound to {self.binding.node}, pinned to {self.node}"] if self.binding.node != self.node else []
        for device in self.final.devices:
            if (where := self.local_node.get(device)) != self.binding.node:
                problems.append(f"{device} is not a device of {self.binding.node} (its slice's node: {where!r})")
        return problems + self.detours()

    def _same_physical_device(self) -> list[str]:
        """reschedule-to-local: every node-local copy the pod ended with is a copy of a device the fabric allocation
        before it held (attached for this claim); per device, so a claim of several may also end with fabric devices
        (judged by their own attach) or with a new device in place of one that failed."""
        before = [a for a in self.allocations if a is not self.final and a.cleared_revision is not None]
        if not before or self.final is None:
            return []  # an attached copy nobody used was allocated at once: attached there is all that counts
        # Published identities only: a count entry's device (status data) need not be the copy the scheduler then
        # picks, any node-local copy of the model on the node will do (e.g. a late attach's, IMP-14).
        fabric = {self.identity.get(d) for d in before[-1].devices}
        local = [
            self.identity_in(self.final, d)
            for d, r in zip(self.final.devices, self.final.results, strict=True)
            if not r.get("bindingConditions")
        ]
        if None in fabric:
            return []  # counted entries: the attach is judged by the probe (binding_problems) alone
        strays = sorted(str(i) for i in local if i not in fabric)
        if strays:
            return [f"the fabric allocation was of {sorted(map(str, fabric))}, the node-local copy is of {strays}"]
        return []


def follow(ctx: Context, history: History, node: str, timeout: float | None = None) -> Outcome:
    """Wait for the namespace's pod to bind, then read its outcome (the probe's first answer after the binding)."""
    history.wait(lambda h: h.binding(), timeout=timeout or bind_timeout(ctx.profile), expected="the pod to be bound")
    return outcome(ctx, history, node)


def outcome(ctx: Context, history: History, node: str) -> Outcome:
    """The outcome as recorded so far (the pod may be unbound: then every check says so); a bound pod's once the
    claim stream has delivered up to its binding (History.catch_up), else with `lag` saying what was missing."""
    lag = None
    if (first := history.binding()) is not None:
        lag = history.catch_up(first, f"the pod's binding on {first.node}")
    allocations, binding = history.allocations(), history.binding()
    final = None
    if binding is not None:
        live = [
            a
            for a in allocations
            if a.revision <= binding.revision and (a.cleared_revision is None or a.cleared_revision > binding.revision)
        ]
        final = live[-1] if live else None
    devices = {d for a in allocations for d in a.devices}
    if ctx.invariants:
        ctx.invariants.published(devices)
    seen = Outcome(
        node=node,
        model=ctx.profile.binding_model,
        binding=binding,
        allocations=allocations,
        final=final,
        identity={d: ctx.identity(*d) for d in devices},
        data=_data_identities(history, allocations, ctx.profile.identity_attribute),
        local_node={d: ctx.invariants.node_of(*d) if ctx.invariants else None for d in devices},
        meanings=dict(ctx.profile.failure_conditions),
        lag=lag,
    )
    if ctx.probe is not None:
        seen.probed = True
        if binding is not None:
            seen.at_bind = ctx.probe.after(binding.at)
            _identify_count_entries(ctx, seen, ctx.probe)
        seen.early = early_conditions(seen, ctx.probe)
    return seen


def _data_identities(
    history: History, allocations: list[Allocation], attribute: str
) -> dict[tuple[int, str, str], str]:
    """(allocation revision, pool, device) -> the physical device the claim's status.devices[].data names for it while
    that allocation stood (a count entry's device, where the stack writes it there): the fallback for entries no
    slice identifies."""
    name = attribute.rpartition("/")[2]
    out: dict[tuple[int, str, str], str] = {}
    events = [e for e in history.events("claim") if not e.deleted]
    for a in allocations:
        for e in events:
            if e.revision < a.revision or (a.cleared_revision is not None and e.revision >= a.cleared_revision):
                continue
            for entry in (e.obj.get("status") or {}).get("devices") or []:
                value = (entry.get("data") or {}).get(name) or (entry.get("data") or {}).get(attribute)
                if value and (entry["pool"], entry["device"]) in a.devices:
                    out[(a.revision, entry["pool"], entry["device"])] = str(value)
    return out


def _identify_count_entries(ctx: Context, seen: Outcome, probe: Recorder) -> None:
    """A count entry the pod bound with names no device. On a node the scenario has to itself (no other scenario's
    attach, no idle copy there when it started), the devices the fabric attached to that node between the first
    allocation and the binding are the scenario's: with one such device and one entry, that is its identity."""
    if seen.final is None or not any(lease.exclusive for lease in ctx.leases) or not seen.allocations:
        return
    final = seen.final
    unknown = [d for d in final.devices if seen.identity_in(final, d) is None and seen.local_node.get(d) == ""]
    before = {i for i, (n, _) in probe.after(seen.allocations[0].at).items() if n == seen.node}
    new = [i for i, s in (seen.at_bind or {}).items() if s == (seen.node, "attached") and i not in before]
    if len(unknown) == 1 and len(new) == 1:
        seen.identity[unknown[0]] = new[0]


def early_conditions(seen: Outcome, probe: Recorder) -> list[str]:
    """IMP-3: every binding condition, and every condition that means `reschedule` (it says "attached, now
    reallocate"), seen True on a fabric allocation while the fabric did not yet say the device was attached to the
    allocation's node. The probe answer compared is the first one sent after the watch delivered the condition, judged
    as IMP-3's run-wide clause judges it (order.early_answer: a write delivered late while the device leaves is not
    early)."""
    out = []
    final_ids = set(seen.final_identities()) if seen.path == "local" else set()
    for a in seen.allocations:
        for r in a.results:
            if not r.get("bindingConditions"):
                continue
            wanted = set(r["bindingConditions"]) | {t for t, m in seen.meanings.items() if m == "reschedule"}
            ident = seen.identity_in(a, (r["pool"], r["device"]))
            candidates = {ident} if ident else final_ids - {None}
            for (pool, device, ctype), (_, at) in a.true_at.items():
                if (pool, device) != (r["pool"], r["device"]) or ctype not in wanted:
                    continue
                if not candidates:
                    seen.unidentified.append(f"{pool}/{device}")
                    continue
                states = probe.after(at)  # waits for the first answer sent after the delivery
                answers = probe.samples(at - LOOKBACK_S)
                seen.judged += 1
                if all(early_answer(answers, at, i, a.node) is not None for i in candidates):
                    said = {i: states.get(i) for i in candidates}
                    out.append(f"{device}: {ctype} True while the fabric says {said}, allocation on {a.node}")
    return out
