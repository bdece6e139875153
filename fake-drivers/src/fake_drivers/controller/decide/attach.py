"""A claim that holds a device through its fabric copy: attach it, report it attached or failed, reschedule
to the node-local copy, or move it; and which of two claims holding one device gives it up."""

from __future__ import annotations

from ..model import FabricDevice, NodeCopy
from ..settings import Mode, Settings
from .broken import BROKEN_REPORT_AFTER_S, _broken_remember_attached, _noticed, _timer
from .holdings import Holding
from .plan import ATTACHED, ATTACHING, FREE, Attach, ConditionWrite, Detach, Failure, Memory, Plan


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
    used: list[str] | None = None,
) -> None:
    """`used`: claim uids the device's node still uses it for (prepared there, not unprepared yet)."""
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
    elif _broken_remember_attached(settings, plan, d, memory, now) and (d.state, d.node) != (ATTACHED, node):
        where = f"{d.state} {d.node or ''}".strip()
        write(settings.attached, "BrokenOnPurpose", f"remembered attached from an earlier use ({where})", "stale")
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
    elif d.state == ATTACHED and (others := [u for u in used or [] if u != claim.uid]):
        plan.states[label] = f"attached to {d.node}, still used there (claim {others[0]}): the move to {node} waits"
    elif d.state == ATTACHED:
        plan.detaches.append(Detach(d.uuid, d.node, recheck=False))  # attached elsewhere: move it
        plan.states[label] = f"moving from {d.node} to {node}"
    else:
        plan.states[label] = f"fabric busy: {d.state} {d.node}" + (" (hung)" if d.hung else "")
