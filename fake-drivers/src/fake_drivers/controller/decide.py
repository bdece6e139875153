"""The reconcile decisions: one pure function from a snapshot (fabric, claims, slices, taint rules) to a plan.

Level-triggered: nothing here remembers what happened before except what the caller passes in (operations in
flight, attach failures not yet turned into a quarantine rule, idle timers), so a restarted controller that
reads the cluster and the fabric again decides the same. The caller executes the plan in this order: taint rules
first (a device is hidden before anything else happens to it), then slices, attaches and detaches (handed to
workers), condition writes.

Invariants the decisions keep (IMP-6):
- each physical device is offered at most once: keep-in-pool lists it only in the fabric pool (the node driver's
  deny list hides the hot-plugged copy); reschedule-to-local lists it in the fabric pool only while free, and
  while a claim holds the fabric copy, a "hold" taint keeps the node-local copy from being allocated;
- a device nobody holds is hidden (a "detach" taint) before it is detached, and offered again only once free;
- a device whose attach failed is hidden ("quarantine" taint) before the claim is told, so the reallocation
  the scheduler then does cannot pick it again.

Count-based pools (fabric entries "counted"): the fabric pool lists, per model, the entries claims hold plus one
entry per free device nobody is assigned, so unallocated entries never exceed the fabric's free count. A claim
holding an entry is assigned one free physical device of the model; the assignment is written to the claim
(status.devices[].data.uuid) before the attach, so a restarted controller goes on with the same device.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from .model import Claim, CountedEntry, FabricDevice, NodeCopy, Result, TaintRule, entry_model, entry_name
from .settings import Mode, Purpose, Settings

FREE, ATTACHING, ATTACHED, DETACHING = "free", "attaching", "attached", "detaching"
BROKEN_DETACH_AFTER_S = 1.0  # --broken-detach-while-used: ready (or in use node-locally) this long, then detached
BROKEN_REPORT_AFTER_S = 0.3  # --broken-report-while-attaching: attach in flight this long, then reported
BROKEN_NOTICE_AFTER_S = 2.0  # --broken-no-hold: the unheld node-local copy is noticed this late
BROKEN_QUARANTINE_AFTER_S = 10.0  # --broken-late-quarantine: the failed device is hidden only this long after


def _timer(plan: Plan, memory: Memory, key: str, now: float) -> float:
    """Seconds since `key` was first seen (broken modes only: kept in the idle timers, under a prefixed key)."""
    since = memory.idle_since.get(key, now)
    plan.idle_since[key] = since
    return now - since


@dataclass(frozen=True)
class Snapshot:
    devices: tuple[FabricDevice, ...]
    claims: tuple[Claim, ...]
    copies: tuple[NodeCopy, ...]
    taints: tuple[TaintRule, ...]
    # Names of the cluster's nodes; None when unknown (not read, or not allowed): every node counts as existing.
    nodes: frozenset[str] | None = None

    def node_gone(self, node: str | None) -> bool:
        """The node was deleted: no pod can use a device attached there again."""
        return self.nodes is not None and node is not None and node not in self.nodes


@dataclass(frozen=True)
class Failure:
    """An attach the fabric manager refused, until a quarantine rule records it in the cluster."""

    reason: str
    message: str
    at: float = 0.0  # time.time() when the fabric refused the attach


@dataclass(frozen=True)
class Memory:
    """What the controller knows that the cluster and the fabric do not show (all of it may be lost)."""

    inflight: Mapping[str, str] = field(default_factory=dict)  # uuid -> "attach" | "detach"
    failures: Mapping[str, Failure] = field(default_factory=dict)  # uuid -> failed attach
    idle_since: Mapping[str, float] = field(default_factory=dict)  # uuid -> when it was first seen unheld
    rescheduled: Mapping[str, int] = field(default_factory=dict)  # claim uid -> reschedules asked for
    # --broken-forget-*-on-restart only: (uuid, claim uid) of work found at start, never done ("": a detach).
    forgotten: frozenset[tuple[str, str]] = frozenset()
    # counted: assignments written to claims the watch cache may not show yet
    assigned: Mapping[AssignmentKey, str] = field(default_factory=dict)
    # --broken-report-on-fabric-error only: uuid -> node of the last attach the fabric answered with an error
    errored: Mapping[str, str] = field(default_factory=dict)
    # The first pass after a (re)start: idle timers were lost with the old process, and a device found attached with
    # nobody holding it was released before the restart at the latest, so its grace is over (a restart must not
    # postpone a detach past the promise; the detach guard and the recheck still protect a device claimed meanwhile).
    fresh: bool = False


# (claim uid, allocationTimestamp, (driver, pool, device)): one allocation of a count entry. A claim reallocated to
# the same entry name gets a new timestamp, so an old assignment never carries over.
AssignmentKey = tuple[str, str, tuple[str, str, str]]


def assignment_key(claim: Claim, result: Result) -> AssignmentKey:
    return (claim.uid, claim.allocated_at or "", result.key)


def assigned_device(claim: Claim, result: Result, memory: Memory | None) -> str | None:
    """The physical device of a count entry: from the claim's status, else from a write the cache lacks yet."""
    found = claim.assigned.get(result.key)
    if found is None and memory is not None:
        found = memory.assigned.get(assignment_key(claim, result))
    return found


@dataclass(frozen=True)
class ConditionWrite:
    claim: Claim
    result: Result
    type: str
    reason: str
    message: str
    uuid: str = ""  # the physical device, so an attach failure can be forgotten once reported


@dataclass(frozen=True)
class Assignment:
    """counted: the physical device a count entry gets, written to the claim before the attach."""

    claim: Claim
    result: Result
    uuid: str


@dataclass(frozen=True)
class TaintCreate:
    purpose: Purpose
    uuid: str
    device: str
    reason: str | None = None
    message: str | None = None
    until: float | None = None


@dataclass(frozen=True)
class Attach:
    uuid: str
    node: str
    claim: str
    # reschedule-to-local: the hold rule must exist before the device is attached (its copy appears then).
    needs_hold: bool = False


@dataclass(frozen=True)
class Detach:
    uuid: str
    node: str | None
    # Idle devices: re-read the claims right before detaching (an allocation may have landed meanwhile).
    recheck: bool


@dataclass
class Plan:
    pools: dict[str, list[FabricDevice | CountedEntry]] = field(default_factory=dict)
    assignments: list[Assignment] = field(default_factory=list)
    create_taints: list[TaintCreate] = field(default_factory=list)
    delete_taints: list[str] = field(default_factory=list)
    conditions: list[ConditionWrite] = field(default_factory=list)
    attaches: list[Attach] = field(default_factory=list)
    detaches: list[Detach] = field(default_factory=list)
    idle_since: dict[str, float] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # "device x" / "claim ns/n pool/dev" -> state, for logs


@dataclass(frozen=True)
class Holding:
    """A claim that holds a physical device, through the fabric copy or a node-local copy."""

    claim: Claim
    result: Result
    via_fabric: bool

    def failed(self) -> bool:
        return any(self.claim.condition(self.result, t) == "True" for t in self.result.failure_conditions)

    def ready(self) -> bool:
        conds = self.result.binding_conditions
        return bool(conds) and all(self.claim.condition(self.result, t) == "True" for t in conds)

    @property
    def label(self) -> str:
        return f"claim {self.claim.key} {self.result.pool}/{self.result.device}"


def holdings(settings: Settings, snap: Snapshot, memory: Memory | None = None) -> dict[str, list[Holding]]:
    """Physical device uuid -> the allocated claims holding it, by fabric copy (counted: by an entry assigned
    that device) or node-local copy."""
    fabrics = {d.fabric for d in snap.devices}
    by_pool_name = {(d.fabric, d.name): d for d in snap.devices}
    by_name = {d.name: d for d in snap.devices}
    by_uuid = {d.uuid for d in snap.devices}
    copy_uuid = {(c.pool, c.name): c.uuid for c in snap.copies}
    held: dict[str, list[Holding]] = defaultdict(list)
    for claim in snap.claims:
        for result in claim.results:
            if result.driver != settings.driver:
                continue
            if result.pool in fabrics and settings.counted:
                assigned = assigned_device(claim, result, memory)
                if assigned in by_uuid:
                    held[assigned].append(Holding(claim, result, via_fabric=True))
                continue
            if result.pool in fabrics:
                device = by_pool_name.get((result.pool, result.device))
                if device:
                    held[device.uuid].append(Holding(claim, result, via_fabric=True))
                continue
            # A node-local copy: identity from its slice; if the slice already dropped it (detach started),
            # from the name, since the node driver publishes hot-plugged devices under the fabric's name.
            uuid = copy_uuid.get((result.pool, result.device))
            if uuid is None and result.device in by_name:
                uuid = by_name[result.device].uuid
            if uuid in by_uuid:
                held[uuid].append(Holding(claim, result, via_fabric=False))
    return held


def decide(settings: Settings, snap: Snapshot, memory: Memory, now: float) -> Plan:
    plan = Plan(pools={d.fabric: [] for d in snap.devices})
    held = holdings(settings, snap, memory)
    taints = {(t.purpose, t.uuid): t for t in snap.taints}
    copies: dict[str, list[NodeCopy]] = defaultdict(list)
    for copy in snap.copies:
        if copy.uuid:
            copies[copy.uuid].append(copy)
    free: dict[tuple[str, str], list[FabricDevice]] = {}
    if settings.counted:
        free = _available(settings, snap, held, taints, memory)
        _assign(settings, plan, snap, free, memory)  # takes the devices it assigns out of `free`
    for device in sorted(snap.devices, key=lambda d: d.name):
        holders, gone = held.get(device.uuid, []), snap.node_gone(device.node)
        _device(settings, plan, device, holders, taints, copies[device.uuid], memory, now, gone)
    if settings.counted:
        _counted_pools(settings, plan, snap, free)
    if settings.broken_report_all_on_first:
        _broken_report_all(settings, plan, snap)
    known = {d.uuid for d in snap.devices}
    plan.delete_taints += [t.name for t in snap.taints if t.uuid not in known]  # a device the fabric dropped
    return plan


def _device(
    settings: Settings,
    plan: Plan,
    d: FabricDevice,
    holders: list[Holding],
    taints: dict[tuple[Purpose, str], TaintRule],
    copies: list[NodeCopy],
    memory: Memory,
    now: float,
    node_gone: bool = False,
) -> None:
    quarantine, hold, guard = (taints.get((p, d.uuid)) for p in (Purpose.QUARANTINE, Purpose.HOLD, Purpose.DETACH))
    busy = memory.inflight.get(d.uuid)
    failure = memory.failures.get(d.uuid)
    key = f"device {d.name}"

    # Quarantine: the rule is the durable record of a failed attach (reason and message survive a restart).
    why: Failure | None = None
    if failure and quarantine is None:
        # broken on purpose: hidden only well after the failure is reported (the scheduler deallocates meanwhile)
        late = settings.broken_late_quarantine and now < failure.at + BROKEN_QUARANTINE_AFTER_S
        if not settings.broken_offer_failed_device and not late:  # broken on purpose: reported, stays offered
            plan.create_taints.append(
                TaintCreate(
                    Purpose.QUARANTINE, d.uuid, d.name, failure.reason, failure.message, now + settings.quarantine_s
                )
            )
        why = failure
    elif quarantine is not None:
        if (quarantine.until or 0) <= now and d.state == FREE and not failure:
            plan.delete_taints.append(quarantine.name)  # healthy again: offered from the next scheduling on
        else:
            why = Failure(quarantine.reason or "AttachFailed", quarantine.message or "the last attach failed")

    if not settings.counted and (settings.mode is Mode.KEEP_IN_POOL or d.state == FREE):
        plan.pools[d.fabric].append(d)

    # The hold lasts while a claim holds the fabric copy with an allocation that can still bind. Once its
    # failure condition is True the scheduler deallocates it and allocates again within milliseconds, so the
    # node-local copy must be allocatable by then: the hold goes as soon as the reschedule is asked for. (Kept until
    # the clearing, the rescheduled pod's next try, which kube-scheduler makes within milliseconds of its own
    # deallocation, finds the copy still held and takes another device: a second attach on every move.)
    live_fabric_holders = [h for h in holders if h.via_fabric and not h.failed()]
    want_hold = settings.mode is Mode.RESCHEDULE_TO_LOCAL and bool(live_fabric_holders)
    want_hold = want_hold and not settings.broken_no_hold  # broken on purpose: the copy offered as it appears
    if want_hold and hold is None:
        plan.create_taints.append(TaintCreate(Purpose.HOLD, d.uuid, d.name))
    elif not want_hold and hold is not None:
        plan.delete_taints.append(hold.name)

    if holders:
        _broken_while_held(settings, plan, d, holders, busy, memory, now)
        if guard is not None and d.state != DETACHING and not busy:
            plan.delete_taints.append(guard.name)  # claimed again before the detach started: keep it
        losers = _losers(holders)
        if losers:
            plan.states[key] = "HELD TWICE by " + ", ".join(h.claim.key for h in holders)
        for holding in holders:
            if holding.via_fabric:
                _fabric_holder(settings, plan, d, holding, holding in losers, why, busy, copies, memory, now)
            else:
                plan.states[holding.label] = f"in use through the node-local copy on {holding.result.pool}"
        plan.states.setdefault(key, f"{d.state} {d.node or ''}".strip() + f", held by {holders[0].claim.key}")
        return

    # Nobody holds it.
    if d.state == FREE:
        if guard is not None and not copies and not busy:
            plan.delete_taints.append(guard.name)  # detached, and no node-local copy left: offer it again
        plan.states[key] = f"quarantined ({why.reason})" if why else "free"
    elif d.state == ATTACHED and settings.broken_never_detach:
        plan.states[key] = f"idle on {d.node}, never detached (broken on purpose)"
    elif (
        d.state in (ATTACHING, ATTACHED)
        and settings.broken_keep_unready_attach
        and f"unready:{d.uuid}" in memory.idle_since
    ):
        _timer(plan, memory, f"unready:{d.uuid}", now)
        plan.states[key] = f"{d.state} {d.node}, its claim went away before ready: never detached (broken on purpose)"
    elif d.state == ATTACHED and settings.broken_detach_first_only and f"notfirst:{d.uuid}" in memory.idle_since:
        _timer(plan, memory, f"notfirst:{d.uuid}", now)
        plan.states[key] = f"idle on {d.node}, not its claim's first device: never detached (broken on purpose)"
    elif d.state == ATTACHED and (d.uuid, "") in memory.forgotten:
        plan.states[key] = f"idle on {d.node}, its detach forgotten at the restart (broken on purpose)"
    elif d.state == ATTACHED and node_gone and settings.broken_keep_on_deleted_node:
        plan.states[key] = f"idle on {d.node}, a deleted node: never detached (broken on purpose)"
    elif d.state == ATTACHED:
        since = memory.idle_since.get(d.uuid, now - settings.idle_grace_s if memory.fresh else now)
        if node_gone:
            # The idle grace keeps a device for reuse on its node; a deleted node has no pod left to reuse it.
            since = min(since, now - settings.idle_grace_s)
        plan.idle_since[d.uuid] = since
        if now - since < settings.idle_grace_s:
            plan.states[key] = f"idle on {d.node}"
            return
        plan.states[key] = f"hidden before detach from {d.node}"
        if guard is None:
            plan.create_taints.append(TaintCreate(Purpose.DETACH, d.uuid, d.name))
        elif now - guard.since >= settings.taint_settle_s and not busy:
            plan.detaches.append(Detach(d.uuid, d.node, recheck=True))
    elif d.state == DETACHING:
        if guard is None:
            plan.create_taints.append(TaintCreate(Purpose.DETACH, d.uuid, d.name))
        plan.states[key] = f"detaching from {d.node}"
    else:
        plan.states[key] = f"attaching to {d.node} without a claim" + (" (hung)" if d.hung else "")


def _broken_while_held(
    settings: Settings,
    plan: Plan,
    d: FabricDevice,
    holders: list[Holding],
    busy: str | None,
    memory: Memory,
    now: float,
) -> None:
    """The broken modes that act on a held device (selftests only; every one off by default)."""
    if settings.broken_detach_first_only and any(_not_first(settings, h) for h in holders):
        _timer(plan, memory, f"notfirst:{d.uuid}", now)  # remembered once nobody holds it: never detached then
    if settings.broken_keep_unready_attach and any(h.via_fabric and not h.ready() and not h.failed() for h in holders):
        _timer(plan, memory, f"unready:{d.uuid}", now)  # remembered once nobody holds it: never detached then
    if settings.broken_detach_shared_early and d.state == ATTACHED and not busy:
        for h in holders:  # the most pods that ever reserved the claim, kept under a prefixed idle-timer key
            key = f"reserved:{h.claim.uid}"
            most = max(memory.idle_since.get(key, 0.0), float(len(h.claim.reserved_for)))
            plan.idle_since[key] = most
            if 0 < len(h.claim.reserved_for) < most:
                plan.detaches.append(Detach(d.uuid, d.node, recheck=False))
                plan.states[f"device {d.name}"] = f"a pod left shared {h.claim.key}: detached (broken on purpose)"
                return
    in_use = any(h.ready() or not h.via_fabric for h in holders)
    due = settings.broken_detach_while_used and in_use and d.state == ATTACHED and not busy
    if due and _timer(plan, memory, f"used:{d.uuid}", now) >= BROKEN_DETACH_AFTER_S:
        plan.detaches.append(Detach(d.uuid, d.node, recheck=False))
        plan.states[f"device {d.name}"] = f"in use on {d.node}, detached (broken on purpose)"


def _not_first(settings: Settings, holding: Holding) -> bool:
    """--broken-detach-first-only: the holding is a device of a claim of several, not the claim's first one."""
    results = [r for r in holding.claim.results if r.driver == settings.driver]
    return len(results) > 1 and holding.result != results[0]


def _broken_report_all(settings: Settings, plan: Plan, snap: Snapshot) -> None:
    """--broken-report-all-on-first: once one device of a claim is (being) reported ready or rescheduled, every other
    device of the claim is reported the same, attached or not (per-device bookkeeping wrong on purpose)."""
    planned = {(w.claim.uid, w.result.key, w.type) for w in plan.conditions}
    for claim in snap.claims:
        results = [r for r in claim.results if r.driver == settings.driver and r.binding_conditions]
        for type_ in (settings.attached, settings.reschedule):
            said = [claim.condition(r, type_) == "True" or (claim.uid, r.key, type_) in planned for r in results]
            reported = [r for r, yes in zip(results, said, strict=True) if yes]
            if not reported or len(results) < 2:
                continue
            for r in results:
                if r not in reported and claim.condition(r, settings.attach_failed) != "True":
                    message = f"reported with {reported[0].pool}/{reported[0].device} (selftest mode)"
                    plan.conditions.append(ConditionWrite(claim, r, type_, "BrokenOnPurpose", message))
            break


def _available(
    settings: Settings,
    snap: Snapshot,
    held: Mapping[str, list[Holding]],
    taints: Mapping[tuple[Purpose, str], TaintRule],
    memory: Memory,
) -> dict[tuple[str, str], list[FabricDevice]]:
    """counted: (fabric, model) -> the devices a count entry may get, by name: free, nobody holds them, no rule
    hides them, nothing pending on them."""
    free: dict[tuple[str, str], list[FabricDevice]] = defaultdict(list)
    # broken on purpose: a device whose attach failed is given to the next count entry like any free one
    forgotten = {Purpose.QUARANTINE} if settings.broken_reassign_failed_device else set()
    # broken on purpose: a device idle on another node is given to an entry (and reported there, not moved)
    states = (FREE, ATTACHED) if settings.broken_accept_attached_elsewhere else (FREE,)
    for d in sorted(snap.devices, key=lambda d: d.name):
        if (
            d.state in states
            and not held.get(d.uuid)
            and not any((purpose, d.uuid) in taints for purpose in Purpose if purpose not in forgotten)
            and (d.uuid not in memory.failures or settings.broken_reassign_failed_device)
            and d.uuid not in memory.inflight
        ):
            free[(d.fabric, d.model)].append(d)
    return free


def _assign(
    settings: Settings, plan: Plan, snap: Snapshot, free: dict[tuple[str, str], list[FabricDevice]], memory: Memory
) -> None:
    """counted: give each live count entry without a device one available device of its model on its fabric.

    The assignments are written to the claims first and attached from the next pass on (the claim then names the
    device), so an attach never runs for an assignment a restart would forget.
    """
    fabrics = {d.fabric for d in snap.devices}
    waiting = [
        Holding(claim, result, via_fabric=True)
        for claim in snap.claims
        for result in claim.results
        if result.driver == settings.driver
        and result.pool in fabrics
        and result.binding_conditions
        and assigned_device(claim, result, memory) is None
    ]
    for holding in sorted(waiting, key=lambda h: (h.claim.allocated_at or "", h.claim.key, h.result.device)):
        claim, result, label = holding.claim, holding.result, holding.label
        if holding.failed() or holding.ready():
            plan.states[label] = "failed, waiting for the scheduler to reallocate" if holding.failed() else "ready"
            continue
        parsed = entry_model(result.device)
        candidates = free[(result.pool, parsed[0])] if parsed else []
        if claim.node is None:
            message = "allocation does not name exactly one node"
            plan.conditions.append(ConditionWrite(claim, result, settings.attach_failed, "NoSingleNode", message))
            plan.states[label] = "attach-failed"
        elif not candidates:
            model = parsed[0] if parsed else f"? ({result.device} is no count entry)"
            message = f"no free device of model {model} on fabric {result.pool}"
            plan.conditions.append(ConditionWrite(claim, result, settings.attach_failed, "NoFreeDevice", message))
            plan.states[label] = "attach-failed (no free device)"
        else:
            device = candidates.pop(0)
            plan.assignments.append(Assignment(claim, result, device.uuid))
            plan.states[label] = f"assigned {device.name}"


def _counted_pools(
    settings: Settings, plan: Plan, snap: Snapshot, free: dict[tuple[str, str], list[FabricDevice]]
) -> None:
    """counted: per fabric and model, the entries claims hold plus one more per device still available.

    Allocated entries stay listed (the pool does not change when the scheduler takes an entry: the assignment
    moves a device from "available" to "held" at the same time), and new entries take the lowest free indices.
    """
    for fabric in plan.pools:
        in_use: dict[str, set[int]] = defaultdict(set)
        for claim in snap.claims:
            for result in claim.results:
                parsed = entry_model(result.device) if result.driver == settings.driver else None
                if result.pool == fabric and parsed:
                    in_use[parsed[0]].add(parsed[1])
        models = {d.model: d.attributes for d in sorted(snap.devices, key=lambda d: d.name) if d.fabric == fabric}
        entries: list[FabricDevice | CountedEntry] = []
        for model, attributes in sorted(models.items()):
            count, indices, i = len(free[(fabric, model)]), set(in_use[model]), 0
            while count:
                if i not in indices:
                    indices.add(i)
                    count -= 1
                i += 1
            entries += [CountedEntry(entry_name(model, i), fabric, model, attributes) for i in sorted(indices)]
        plan.pools[fabric] = entries


def _noticed(settings: Settings, plan: Plan, memory: Memory, d: FabricDevice, now: float) -> bool:
    """Whether the node-local copy is noticed: at once, or (--broken-no-hold) only once it has been published for
    BROKEN_NOTICE_AFTER_S, as a stack that finds copies on a periodic rescan."""
    if not settings.broken_no_hold:
        return True
    if _timer(plan, memory, f"copy:{d.uuid}", now) >= BROKEN_NOTICE_AFTER_S:
        return True
    plan.states[f"device {d.name}"] = f"copy on {d.node} not noticed yet (broken on purpose)"
    return False


def _losers(holders: list[Holding]) -> list[Holding]:
    """When two live claims hold one device, the pending fabric-copy holders that must give it up.

    A holder whose failure condition is True does not count: the scheduler never binds it and deallocates it.
    """
    live = [h for h in holders if not h.failed()]
    if len(live) < 2:
        return []
    winners = [h for h in live if not h.via_fabric or h.ready()]
    if not winners:
        winners = [min(live, key=lambda h: (h.claim.allocated_at or "", h.claim.key))]
    return [h for h in live if h not in winners and h.via_fabric]


def _fabric_holder(
    settings: Settings,
    plan: Plan,
    d: FabricDevice,
    holding: Holding,
    loser: bool,
    why: Failure | None,
    busy: str | None,
    copies: list[NodeCopy],
    memory: Memory,
    now: float,
) -> None:
    claim, result, label = holding.claim, holding.result, holding.label
    node = claim.node

    def write(type_: str, reason: str, message: str, state: str) -> None:
        plan.conditions.append(ConditionWrite(claim, result, type_, reason, message, d.uuid))
        plan.states[label] = state

    reattach = f"reattach:{claim.uid}:{d.uuid}"  # --broken-needless-reattach: detached once already for this claim
    if settings.broken_needless_reattach and reattach in memory.idle_since:
        plan.idle_since[reattach] = memory.idle_since[reattach]

    if holding.failed():
        plan.states[label] = "failed, waiting for the scheduler to reallocate"
    elif holding.ready():
        plan.states[label] = f"ready on {node}"
    elif not result.binding_conditions:
        plan.states[label] = "allocated without binding conditions"
    elif (d.uuid, claim.uid) in memory.forgotten:
        plan.states[label] = f"{d.state} at start, forgotten (broken on purpose)"
    elif node is None:
        write(settings.attach_failed, "NoSingleNode", "allocation does not name exactly one node", "attach-failed")
    elif why is not None and settings.broken_no_failure_condition:
        plan.states[label] = f"attach failed ({why.reason}), not reported (broken on purpose)"
    elif why is not None:
        write(settings.attach_failed, why.reason, why.message, f"attach-failed ({why.reason})")
    elif loser:
        write(settings.reschedule, "DeviceInUse", f"device {d.uuid} is held by another claim", "reschedule (in use)")
    elif settings.broken_report_while_attaching and (busy == "attach" or d.state == ATTACHING):
        if _timer(plan, memory, f"attaching:{d.uuid}", now) >= BROKEN_REPORT_AFTER_S:
            write(settings.attached, "BrokenOnPurpose", "reported while the attach is in flight", "attached (broken)")
    elif settings.broken_report_on_fabric_error and d.state == FREE and memory.errored.get(d.uuid) == node:
        write(settings.attached, "BrokenOnPurpose", "reported after the fabric answered an error", "attached (broken)")
    elif busy:
        plan.states[label] = f"{busy} in flight ({node})"
    elif d.state == FREE:
        needs_hold = settings.mode is Mode.RESCHEDULE_TO_LOCAL and not settings.broken_no_hold
        plan.attaches.append(Attach(d.uuid, node, claim.key, needs_hold=needs_hold))
        plan.states[label] = f"attaching to {node}"
        if settings.broken_report_before_attach:
            write(
                settings.attached, "BrokenOnPurpose", "reported before the attach (selftest mode)", "attached (broken)"
            )
    elif (
        d.state == ATTACHED and d.node == node and settings.broken_needless_reattach and reattach not in plan.idle_since
    ):
        plan.idle_since[reattach] = now
        plan.detaches.append(Detach(d.uuid, d.node, recheck=False))
        plan.states[label] = f"attached to {node}, detached to attach it again (broken on purpose)"
    elif d.state == ATTACHED and d.node == node:
        keep = settings.mode is Mode.KEEP_IN_POOL or memory.rescheduled.get(claim.uid, 0) >= settings.max_reschedules
        if keep:
            # reschedule-to-local after max_reschedules rounds: keep the fabric copy; the hold rule keeps the
            # node-local copy from being allocated for as long as this claim holds the fabric copy.
            write(
                settings.attached,
                "Attached",
                f"fabric manager attached device {d.uuid} to node {node}",
                f"attached to {node}, reporting it",
            )
        elif any(c.node == node for c in copies) and _noticed(settings, plan, memory, d, now):
            copy = next(c for c in copies if c.node == node)
            write(
                settings.reschedule,
                "NodeLocalCopyPublished",
                f"device {d.uuid} is attached and published node-locally as {copy.pool}/{copy.name}; reallocate",
                "reschedule to the node-local copy",
            )
        elif settings.broken_early_reschedule:
            message = f"device {d.uuid} is attached; reallocate (before its node-local copy exists: broken on purpose)"
            write(settings.reschedule, "BrokenOnPurpose", message, "reschedule before the copy (broken)")
        else:
            plan.states[label] = f"attached to {node}, waiting for the node driver to republish it"
    elif d.state == ATTACHED and settings.broken_accept_attached_elsewhere:
        where = f"attached to {d.node}, reported for {node}"
        write(settings.attached, "BrokenOnPurpose", f"device {d.uuid} {where} (selftest mode)", f"{where} (broken)")
    elif d.state == ATTACHED:
        plan.detaches.append(Detach(d.uuid, d.node, recheck=False))  # attached elsewhere: move it
        plan.states[label] = f"moving from {d.node} to {node}"
    else:
        plan.states[label] = f"fabric busy: {d.state} {d.node}" + (" (hung)" if d.hung else "")
