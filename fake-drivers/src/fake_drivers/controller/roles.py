"""The controller split into roles, the way real composable stacks split it (a pool publisher, an attacher, a
condition writer: three processes that coordinate only through the Kubernetes API and the fabric manager).

Every role reads the same snapshot (claims, slices, taint rules, fabric) and decides the same plan; each executes
only its share of it. What one role knows and another needs travels through the cluster or the fabric:
- an attach the fabric refused: the attacher records it as the quarantine DeviceTaintRule (reason and message in
  its annotations), and the condition writer reports attach-failed from that rule;
- an attach done: the fabric shows the device attached to the allocated node, and only then does the condition
  writer set the binding condition True;
- a detach: the publisher hides the idle device (the detach rule), the attacher detaches it once the rule has
  settled, and the publisher offers it again once the fabric shows it free.
Nothing else is remembered across roles, so each survives its own restart at any step.
"""

from __future__ import annotations

import enum
from dataclasses import replace

from .decide import Plan
from .settings import Purpose


class Role(enum.StrEnum):
    ALL = "all"  # one process does everything (the default)
    PUBLISHER = "publisher"  # fabric pools and the taint rules that hide devices (hold, detach, expired ones)
    ATTACHER = "attacher"  # attaches, detaches, count-entry assignments, quarantine rules of refused attaches
    CONDITIONS = "conditions"  # binding and failure conditions on claims

    @property
    def removes_on_stop(self) -> bool:
        """--remove-on-stop acts in the role that owns the pools (an uninstall of the stack removes them once)."""
        return self in (Role.ALL, Role.PUBLISHER)


def share(plan: Plan, role: Role) -> Plan:
    """The part of `plan` that `role` executes (the other fields emptied; states kept for the logs)."""
    if role is Role.ALL:
        return plan
    publisher, attacher = role is Role.PUBLISHER, role is Role.ATTACHER
    return replace(
        plan,
        pools=plan.pools if publisher else {},
        assignments=plan.assignments if attacher else [],
        create_taints=[t for t in plan.create_taints if (t.purpose is Purpose.QUARANTINE) == attacher]
        if publisher or attacher
        else [],
        delete_taints=plan.delete_taints if publisher else [],
        conditions=plan.conditions if role is Role.CONDITIONS else [],
        attaches=plan.attaches if attacher else [],
        detaches=plan.detaches if attacher else [],
    )
