"""What the node's readiness daemon does next: one pure function from a snapshot (its node's devices as the device
manager reports them, the claims allocated on its node) to a plan, so a restarted daemon decides the same.

Readying a device is an attach to its node in the device manager (the reference's fake hardware: a fabric per node,
whose attach time is the preparation time, e.g. reprogramming). The daemon:
- publishes every device of its node with the binding conditions, except those whose readying failed within the
  quarantine (hidden BEFORE the claim is told, so the reallocation cannot pick them again);
- readies a device allocated to a claim on its node, and reports the binding condition True only once the device
  manager says it is ready there;
- on a readying failure reports the failure condition True with the device manager's reason and message;
- unprepares a ready device no claim holds any more (after a grace: the claim may be allocated it again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FREE, ATTACHING, ATTACHED, DETACHING = "free", "attaching", "attached", "detaching"


@dataclass(frozen=True)
class Conditions:
    ready: str  # the binding condition
    failed: str  # the binding failure condition


@dataclass(frozen=True)
class NodeDevice:
    """A device of the daemon's node as the device manager reports it."""

    uuid: str
    name: str
    model: str
    attributes: dict[str, Any]
    state: str
    node: str | None  # where it is ready, or being readied / unprepared
    failed_at: float | None = None  # the last readying failure (epoch), if any
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Held:
    """A device of the node allocated to a claim: the claim, and the conditions its status reports for it."""

    namespace: str
    claim: str
    uid: str
    pool: str
    device: str
    allocated_at: float  # allocationTimestamp (epoch), 0 when unknown
    conditions: dict[str, str]  # type -> status


@dataclass
class Plan:
    publish: list[NodeDevice] = field(default_factory=list)  # the node's slice, in order
    ready: list[NodeDevice] = field(default_factory=list)  # start readying these
    report_ready: list[Held] = field(default_factory=list)
    report_failed: list[tuple[Held, str, str]] = field(default_factory=list)  # with reason and message
    unprepare: list[NodeDevice] = field(default_factory=list)
    unheld_since: dict[str, float] = field(default_factory=dict)  # ready devices nobody holds -> since when


@dataclass(frozen=True)
class Policy:
    quarantine_s: float = 60.0
    unprepare_grace_s: float = 2.0
    # deliberately broken modes (selftests): never on by default
    broken_ready_before_prepared: bool = False
    broken_no_failure_condition: bool = False
    broken_never_ready: bool = False
    broken_stale_ready: bool = False  # a device readied once is reported ready again without readying it
    broken_stale_failure: bool = False  # a device whose readying failed once is reported failed to every later claim
    broken_report_before_unpublish: bool = False  # a failed device stays published BROKEN_UNPUBLISH_AFTER_S more


BROKEN_UNPUBLISH_AFTER_S = 1.0  # --broken-report-before-unpublish: the failure reported, the device unpublished later


def quarantined(device: NodeDevice, now: float, policy: Policy) -> bool:
    """Its readying failed within the quarantine and it is not in use: not offered again meanwhile.

    A failure stamped after `now` counts as just failed: a round takes `now` before it lists the claims and asks the
    device manager, so a readying that fails in between is read in the same round (and the manager's clock is its
    own). Counted as not failed, the device stayed published while the same round reported the failure (RDY-5's
    order, seen once under load)."""
    late = BROKEN_UNPUBLISH_AFTER_S if policy.broken_report_before_unpublish else 0.0  # broken on purpose
    failed = device.failed_at is not None and late <= max(0.0, now - device.failed_at) < policy.quarantine_s
    return failed and device.state == FREE


def decide(
    node: str,
    devices: list[NodeDevice],
    held: list[Held],
    conditions: Conditions,
    inflight: set[str],
    unheld_since: dict[str, float],
    now: float,
    policy: Policy,
    readied: frozenset[str] = frozenset(),
) -> Plan:
    """`readied`: devices the daemon has seen ready on its node (only the broken mode broken_stale_ready reads it)."""
    plan = Plan()
    by_name = {d.name: d for d in devices}
    plan.publish = [d for d in devices if not quarantined(d, now, policy)]
    # Told only once hidden: a failed device this plan still publishes is not reported (broken on purpose:
    # --broken-report-before-unpublish tells the claim first, --broken-stale-failure tells it after the quarantine)
    told_first = policy.broken_report_before_unpublish or policy.broken_stale_failure
    offered = set() if told_first else {d.uuid for d in plan.publish}
    holding: set[str] = set()
    for h in held:
        device = by_name.get(h.device)
        if device is None:
            continue
        holding.add(device.uuid)
        if h.conditions.get(conditions.failed) == "True" or h.conditions.get(conditions.ready) == "True":
            continue  # told already: the scheduler binds, or deallocates
        failed_for_it = device.failed_at is not None and device.failed_at >= h.allocated_at - 1.0
        failed_for_it = failed_for_it or (policy.broken_stale_failure and device.failed_at is not None)
        if device.state == FREE and failed_for_it and device.uuid not in inflight:
            if not policy.broken_no_failure_condition and device.uuid not in offered:
                plan.report_failed.append(
                    (h, device.reason or "PreparationFailed", device.message or "readying failed")
                )
            continue
        if device.state == ATTACHED and device.node == node:
            if not policy.broken_never_ready:
                plan.report_ready.append(h)
        elif policy.broken_stale_ready and device.uuid in readied:
            plan.report_ready.append(h)  # ready once, so ready now: never asked again (broken on purpose)
        elif device.state == FREE and device.uuid not in inflight:
            plan.ready.append(device)
            if policy.broken_ready_before_prepared:
                plan.report_ready.append(h)
        elif device.state == ATTACHING and policy.broken_ready_before_prepared:
            plan.report_ready.append(h)
    for device in devices:
        if device.state != ATTACHED or device.uuid in holding or device.uuid in inflight:
            continue
        since = unheld_since.get(device.uuid, now)
        plan.unheld_since[device.uuid] = since
        if now - since >= policy.unprepare_grace_s:
            plan.unprepare.append(device)
    return plan
