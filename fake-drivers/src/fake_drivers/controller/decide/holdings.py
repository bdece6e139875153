"""Which allocated claims hold each physical device: through its fabric copy (counted: an entry assigned the
device) or a node-local copy."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..model import Claim, Result
from ..settings import Settings
from .plan import AssignmentKey, Memory, Snapshot


def assignment_key(claim: Claim, result: Result) -> AssignmentKey:
    return (claim.uid, claim.allocated_at or "", result.key)


def assigned_device(claim: Claim, result: Result, memory: Memory | None) -> str | None:
    """The physical device of a count entry: from the claim's status, else from a write the cache lacks yet."""
    found = claim.assigned.get(result.key)
    if found is None and memory is not None:
        found = memory.assigned.get(assignment_key(claim, result))
    return found


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
