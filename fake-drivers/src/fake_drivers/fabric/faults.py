"""Fault book: faults armed by the suite, consumed by the next matching attach/detach operations.

Faults live in memory on purpose: they are test control, not fabric truth, and a restart of the manager should
come back clean rather than replay half-used faults.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from enum import StrEnum


class Operation(StrEnum):
    ATTACH = "attach"
    DETACH = "detach"


class FaultMode(StrEnum):
    FAIL = "fail"  # the operation runs its normal time, then fails with the fault's reason
    HANG = "hang"  # the operation waits until released; the release says whether it completes or fails
    SLOW = "slow"  # the operation takes delay_seconds longer, then completes


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


class FaultBook:
    """Ordered set of armed faults. Single-threaded: the service calls it from its event loop only."""

    def __init__(self) -> None:
        self._faults: dict[str, Fault] = {}
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
        )
        self._faults[fault.id] = fault
        return fault

    def list(self) -> list[Fault]:
        return list(self._faults.values())

    def get(self, fault_id: str) -> Fault | None:
        return self._faults.get(fault_id)

    def remove(self, fault_id: str) -> Fault | None:
        return self._faults.pop(fault_id, None)

    def clear(self) -> int:
        count = len(self._faults)
        self._faults.clear()
        return count

    def take(self, operation: Operation, device: str) -> Fault | None:
        """Consume one use of the fault that applies to this operation, or return None.

        A fault naming the device wins over a fault for any device, so a test can arm a global slowdown and
        still single out one device; among equals the oldest is used first.
        """
        candidates = [f for f in self._faults.values() if f.operation is operation and f.device in (device, None)]
        if not candidates:
            return None
        fault = min(candidates, key=lambda f: (f.device is None, f.seq))
        fault.remaining -= 1
        fault.used += 1
        if fault.remaining == 0:
            del self._faults[fault.id]
        return fault
