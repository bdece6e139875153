"""The broken-on-purpose decisions (selftests only; every mode off by default) and the timers they keep."""

from __future__ import annotations

from ..model import FabricDevice, TaintRule
from ..settings import Settings
from .holdings import Holding
from .plan import ATTACHED, ConditionWrite, Detach, Memory, Plan, Snapshot

BROKEN_DETACH_AFTER_S = 1.0  # --broken-detach-while-used: ready (or in use node-locally) this long, then detached
# --broken-report-while-attaching: reported at the first pass that sees the attach in flight (was 0.3 s in flight: since
# the controller no longer polls in a tight loop, its next pass often came after the 1 s attach, so it broke nothing)
BROKEN_REPORT_AFTER_S = 0.0
BROKEN_NOTICE_AFTER_S = 2.0  # --broken-no-hold: the unheld node-local copy is noticed this late
BROKEN_QUARANTINE_AFTER_S = 10.0  # --broken-late-quarantine: the failed device is hidden only this long after
BROKEN_HIDE_AFTER_S = 1.0  # --broken-report-before-hiding: the failure reported, the device hidden this long after


def forgotten_failure(rule: TaintRule) -> str:
    """--broken-reoffer-failed-on-restart: the key (with the device's uuid) of a quarantine rule found at start, whose
    failure the restarted process forgets: each role its share (the publisher deletes the rule, the attacher attaches
    the device again for the claim that holds it, the condition writer never reports the failure)."""
    return f"quarantine@{rule.since}"


def _timer(plan: Plan, memory: Memory, key: str, now: float) -> float:
    """Seconds since `key` was first seen (broken modes only: kept in the idle timers, under a prefixed key)."""
    since = memory.idle_since.get(key, now)
    plan.idle_since[key] = since
    return now - since


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


def _noticed(settings: Settings, plan: Plan, memory: Memory, d: FabricDevice, now: float) -> bool:
    """Whether the node-local copy is noticed: at once, or (--broken-no-hold) only once it has been published for
    BROKEN_NOTICE_AFTER_S, as a stack that finds copies on a periodic rescan."""
    if not settings.broken_no_hold:
        return True
    if _timer(plan, memory, f"copy:{d.uuid}", now) >= BROKEN_NOTICE_AFTER_S:
        return True
    plan.states[f"device {d.name}"] = f"copy on {d.node} not noticed yet (broken on purpose)"
    return False


def _broken_drop_deleting(
    plan: Plan, snap: Snapshot, held: dict[str, list[Holding]], memory: Memory
) -> dict[str, list[Holding]]:
    """--broken-detach-on-claim-delete: a claim being deleted (its finalizer keeps it while its pod still runs) holds
    nothing; a device held only by such claims is detached at once, while the pod still uses it."""
    devices = {d.uuid: d for d in snap.devices}
    kept: dict[str, list[Holding]] = {}
    for uuid, holders in held.items():
        live = [h for h in holders if not h.claim.deleting]
        if live:
            kept[uuid] = live
        d = devices.get(uuid)
        if not live and d is not None and d.state == ATTACHED and uuid not in memory.inflight:
            plan.detaches.append(Detach(uuid, d.node, recheck=False))
            plan.states[f"device {d.name}"] = f"its claim {holders[0].claim.key} is being deleted: detached (broken)"
    return kept


def _broken_remember_attached(settings: Settings, plan: Plan, d: FabricDevice, memory: Memory, now: float) -> bool:
    """--broken-stale-attached: whether the device was ever seen attached (kept under a prefixed idle-timer key), so
    a later claim of it is told attached at once."""
    if not settings.broken_stale_attached:
        return False
    key = f"wasattached:{d.uuid}"
    if key in memory.idle_since or d.state == ATTACHED:
        plan.idle_since[key] = memory.idle_since.get(key, now)
    return key in memory.idle_since
