"""One physical device per pass: its quarantine and hold rules, its place in the fabric pool, its holders, and
its release once nobody holds it (idle grace, detach guard, detach)."""

from __future__ import annotations

from ..model import CountedEntry, FabricDevice, NodeCopy, TaintRule
from ..settings import Mode, Purpose, Settings
from .attach import _fabric_holder, _losers
from .broken import (
    BROKEN_HIDE_AFTER_S,
    BROKEN_QUARANTINE_AFTER_S,
    _broken_remember_attached,
    _broken_while_held,
    _timer,
    forgotten_failure,
)
from .holdings import Holding
from .plan import ATTACHED, ATTACHING, DETACHING, FREE, Detach, Failure, Memory, Plan, Snapshot, TaintCreate


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
        # broken on purpose: reported first, hidden a second later (before the scheduler's next poll deallocates)
        late = late or (settings.broken_report_before_hiding and now < failure.at + BROKEN_HIDE_AFTER_S)
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
        elif (d.uuid, forgotten_failure(quarantine)) in memory.forgotten:
            plan.states[key] = "quarantined before the restart, its failure forgotten (broken on purpose)"
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

    # Claims the node still uses the device for (its driver prepared them; the kubelet has not unprepared them): a pod
    # force-deleted while its container runs leaves its claim released in the API but the device in use on the node.
    # Neither detached nor moved until the node lets it go (a deleted node uses nothing).
    used = [] if settings.broken_detach_on_release or node_gone else d.used_on(d.node)

    if not holders:
        _broken_remember_attached(settings, plan, d, memory, now)  # kept while nobody holds it, too

    if holders:
        _broken_while_held(settings, plan, d, holders, busy, memory, now)
        if guard is not None and d.state != DETACHING and not busy:
            plan.delete_taints.append(guard.name)  # claimed again before the detach started: keep it
        losers = _losers(holders)
        if losers:
            plan.states[key] = "HELD TWICE by " + ", ".join(h.claim.key for h in holders)
        for holding in holders:
            if holding.via_fabric:
                _fabric_holder(settings, plan, d, holding, holding in losers, why, busy, copies, memory, now, used)
            else:
                plan.states[holding.label] = f"in use through the node-local copy on {holding.result.pool}"
        plan.states.setdefault(key, f"{d.state} {d.node or ''}".strip() + f", held by {holders[0].claim.key}")
        return

    # Nobody holds it.
    if d.state == FREE:
        if guard is not None and (d.uuid, "detach") in memory.forgotten:
            plan.states[key] = "detached, its guard forgotten at the restart: never offered again (broken on purpose)"
            return
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
    elif d.state == ATTACHED and {(d.uuid, ""), (d.uuid, "detach")} & memory.forgotten:
        plan.states[key] = f"idle on {d.node}, its detach forgotten at the restart (broken on purpose)"
    elif d.state == ATTACHED and node_gone and settings.broken_keep_on_deleted_node:
        plan.states[key] = f"idle on {d.node}, a deleted node: never detached (broken on purpose)"
    elif d.state == ATTACHED and used:
        # The idle grace starts once the node let it go (no idle timer kept meanwhile).
        plan.states[key] = f"released, still used on {d.node} (claim {used[0]}): waiting for NodeUnprepareResources"
    elif d.state == ATTACHED and settings.broken_detach_on_release and not busy:
        plan.detaches.append(Detach(d.uuid, d.node, recheck=True))  # no grace, no guard, the node not asked
        plan.states[key] = f"released: detached from {d.node} at once (broken on purpose)"
    elif d.state == ATTACHED:
        grace = settings.idle_grace_s
        since = memory.idle_since.get(d.uuid, now - grace if memory.fresh else now)
        if node_gone:
            # The idle grace keeps a device for reuse on its node; a deleted node has no pod left to reuse it.
            since = min(since, now - grace)
        plan.idle_since[d.uuid] = since
        if now - since < grace:
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


def _offer_after_rules(settings: Settings, plan: Plan, snap: Snapshot, memory: Memory, now: float) -> None:
    """reschedule-to-local: a free device is listed in its fabric pool only once every rule on it is gone, and
    gone for taint_settle_s. kube-scheduler's ResourceSlice tracker (1.35-1.38) panics when a DeviceTaintRule is
    deleted while a slice listing its device has grown past the tracker's cached copy of it (the slice and the rule
    are two informers: docs/upstream/scheduler-panic-in-resourceslice-tracker.md); a rule whose device no slice
    lists touches no slice there. Listed in the pass that deleted its detach guard, the device grew the fabric pool
    right beside the rule's delete: the first panic the suite saw."""
    deleting = set(plan.delete_taints)
    lifted = {t.uuid for t in snap.taints if t.name in deleting}
    for fabric, devices in plan.pools.items():
        kept: list[FabricDevice | CountedEntry] = []
        for d in devices:
            uuid = getattr(d, "uuid", None)
            key = f"offer:{uuid}"
            since = now if uuid in lifted else memory.idle_since.get(key)
            if since is not None and now - since < settings.taint_settle_s:
                plan.idle_since[key] = since  # kept while it waits; forgotten once listed
                plan.states[f"device {d.name}"] = "free, listed once its rule has been gone taint_settle_s"
                continue
            kept.append(d)
        plan.pools[fabric] = kept
