"""Count-based pools (fabric entries "counted"): which devices an entry may get, the assignments, the entries
each pool lists."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from ..model import CountedEntry, FabricDevice, TaintRule, entry_model, entry_name
from ..settings import Purpose, Settings
from .holdings import Holding, assigned_device
from .plan import ATTACHED, FREE, Assignment, ConditionWrite, Memory, Plan, Snapshot


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
