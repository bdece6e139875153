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

This module is the entry point (`decide`), and every name is importable from here. The decisions, one module each:
plan.py (what they read and return), holdings.py (who holds each device), device.py (one device: rules, pool,
release), attach.py (a claim holding the fabric copy: attach, report, reschedule, move), counted.py (count-based
pools), broken.py (the broken-on-purpose modes of the selftests).
"""

from __future__ import annotations

from collections import defaultdict

from ..model import FabricDevice, NodeCopy
from ..settings import Mode, Settings
from .broken import (  # noqa: F401 (re-exported)
    BROKEN_DETACH_AFTER_S,
    BROKEN_HIDE_AFTER_S,
    BROKEN_NOTICE_AFTER_S,
    BROKEN_QUARANTINE_AFTER_S,
    BROKEN_REPORT_AFTER_S,
    _broken_drop_deleting,
    _broken_report_all,
)
from .counted import _assign, _available, _counted_pools
from .device import _device, _offer_after_rules
from .holdings import Holding, assigned_device, assignment_key, holdings  # noqa: F401 (re-exported)
from .plan import (  # noqa: F401 (re-exported)
    ATTACHED,
    ATTACHING,
    DETACHING,
    FREE,
    Assignment,
    AssignmentKey,
    Attach,
    ConditionWrite,
    Detach,
    Failure,
    Memory,
    Plan,
    Snapshot,
    TaintCreate,
)


def decide(settings: Settings, snap: Snapshot, memory: Memory, now: float) -> Plan:
    plan = Plan(pools={d.fabric: [] for d in snap.devices})
    held = holdings(settings, snap, memory)
    if settings.broken_detach_on_claim_delete:
        held = _broken_drop_deleting(plan, snap, held, memory)
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
    if settings.mode is Mode.RESCHEDULE_TO_LOCAL and not settings.counted:
        _offer_after_rules(settings, plan, snap, memory, now)
    return plan
