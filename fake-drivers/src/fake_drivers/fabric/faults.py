"""Fault book: faults armed by the suite, consumed by the next matching attach/detach operations.

Faults live in memory on purpose: they are test control, not fabric truth, and a restart of the manager should
come back clean rather than replay half-used faults.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum

# Used-up faults stay readable (GET /v1/faults/{id}: which attaches they hit) up to this many, oldest dropped first.
SPENT_KEPT = 1000


class Operation(StrEnum):
    ATTACH = "attach"
    DETACH = "detach"


class FaultMode(StrEnum):
    FAIL = "fail"  # the operation runs its normal time, then fails with the fault's reason
    HANG = "hang"  # the operation waits until released; the release says whether it completes or fails
    SLOW = "slow"  # the operation takes delay_seconds longer, then completes
    # Attaches and detaches (either operation) matching the selectors are refused at once with 503, nothing done, as
    # long as the fault is armed: the fabric manager out of reach for them until the client disarms it.
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Target:
    """What one operation is done to: the fault selectors are matched against it."""

    device: str  # uuid
    name: str
    fabric: str
    model: str
    node: str  # target node of an attach, source node of a detach


@dataclass(frozen=True)
class Hit:
    """One operation a fault applied to: the record a client reads to learn which physical device it hit."""

    operation_id: str
    target: Target
    at: float


@dataclass
class Fault:
    id: str
    operation: Operation
    mode: FaultMode
    device: str | None  # None: any device
    remaining: int
    reason: str
    message: str
    delay_seconds: float
    seq: int = 0  # creation order; ties on the clock must not reorder faults
    created_at: float = field(default_factory=time.time)
    used: int = 0
    # Selectors besides the device (None: any); a fault applies when every selector given matches.
    model: str | None = None
    fabric: str | None = None
    node: str | None = None
    hits: list[Hit] = field(default_factory=list)

    def matches(self, operation: Operation, target: Target) -> bool:
        wanted = ((self.device, target.device), (self.model, target.model), (self.fabric, target.fabric))
        return (
            (self.operation is operation or self.mode is FaultMode.UNREACHABLE)
            and all(want in (None, got) for want, got in wanted)
            and self.node in (None, target.node)
        )

    @property
    def specificity(self) -> tuple[bool, int]:
        """A fault naming the device wins; then the one with more selectors."""
        return (self.device is not None, sum(x is not None for x in (self.model, self.fabric, self.node)))


class FaultBook:
    """Ordered set of armed faults. Single-threaded: the service calls it from its event loop only."""

    def __init__(self) -> None:
        self._faults: dict[str, Fault] = {}
        self._spent: OrderedDict[str, Fault] = OrderedDict()
        self._ids = itertools.count(1)

    def add(
        self,
        *,
        operation: Operation,
        mode: FaultMode,
        device: str | None,
        count: int,
        reason: str,
        message: str,
        delay_seconds: float = 0.0,
        model: str | None = None,
        fabric: str | None = None,
        node: str | None = None,
    ) -> Fault:
        if count < 1:
            raise ValueError("count must be at least 1")
        seq = next(self._ids)
        fault = Fault(
            id=f"fault-{seq}",
            operation=operation,
            mode=mode,
            device=device,
            remaining=count,
            reason=reason,
            message=message,
            delay_seconds=delay_seconds,
            seq=seq,
            model=model,
            fabric=fabric,
            node=node,
        )
        self._faults[fault.id] = fault
        return fault

    def list(self) -> list[Fault]:
        return list(self._faults.values())

    def get(self, fault_id: str) -> Fault | None:
        """An armed fault, or a used-up one (still showing its hits)."""
        return self._faults.get(fault_id) or self._spent.get(fault_id)

    def remove(self, fault_id: str) -> Fault | None:
        """Disarm an armed fault (None if it is not armed: unknown or used up)."""
        return self._retire(fault_id)

    def clear(self) -> int:
        count = len(self._faults)
        for fault_id in list(self._faults):
            self._retire(fault_id)
        return count

    def take(self, operation: Operation, target: Target, operation_id: str, now: float) -> Fault | None:
        """Consume one use of the fault that applies to this operation, or return None.

        A fault naming the device wins over the others (then the one with more selectors), so a test can arm a
        global slowdown and still single out one device; among equals the oldest is used first. The fault records
        the hit: a client that armed it by model, fabric or node learns which physical device it hit.
        """
        return self._take(operation, target, operation_id, now, unreachable=False)

    def refuse(self, operation: Operation, target: Target, operation_id: str, now: float) -> Fault | None:
        """The armed `unreachable` fault that refuses this operation before it starts (one use), or None."""
        return self._take(operation, target, operation_id, now, unreachable=True)

    def _take(
        self, operation: Operation, target: Target, operation_id: str, now: float, *, unreachable: bool
    ) -> Fault | None:
        candidates = [
            f
            for f in self._faults.values()
            if f.matches(operation, target) and (f.mode is FaultMode.UNREACHABLE) == unreachable
        ]
        if not candidates:
            return None
        fault = min(candidates, key=lambda f: (not f.specificity[0], -f.specificity[1], f.seq))
        fault.remaining -= 1
        fault.used += 1
        fault.hits.append(Hit(operation_id, target, now))
        if fault.remaining == 0:
            self._retire(fault.id)
        return fault

    def _retire(self, fault_id: str) -> Fault | None:
        """No longer armed, still readable with its hits."""
        fault = self._faults.pop(fault_id, None)
        if fault is not None:
            self._spent[fault.id] = fault
            while len(self._spent) > SPENT_KEPT:
                self._spent.popitem(last=False)
        return fault
