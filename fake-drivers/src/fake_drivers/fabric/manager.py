"""Attach and detach operations: validation, atomic reservation, the simulated fabric delay, faults.

Each operation runs as its own asyncio task and the HTTP handler awaits it through ``asyncio.shield``: a client
that disconnects mid-attach does not cancel the fabric operation, which still ends in a defined state.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .config import FabricConfig
from .faults import Fault, FaultBook, FaultMode, Operation, Target
from .store import DeviceRecord, DeviceState, Store

log = logging.getLogger(__name__)

ReleaseOutcome = Literal["complete", "fail"]


class FabricError(Exception):
    """An operation refused or failed; rendered as ``{"error": code, "message": ..., **extra}``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


@dataclass(frozen=True)
class Release:
    outcome: ReleaseOutcome
    reason: str
    message: str


@dataclass
class OperationInfo:
    """An operation in flight (kept in memory: the database only knows the device is attaching/detaching)."""

    id: str
    operation: Operation
    device: str
    node: str
    started_at: float
    fault: Fault | None = None
    released: asyncio.Future[Release] | None = None  # set while the operation hangs
    release: Release | None = None

    @property
    def hung(self) -> bool:
        return self.released is not None and not self.released.done()


@dataclass(frozen=True)
class OperationResult:
    changed: bool  # False: idempotent no-op (already attached there / already free)
    device: DeviceRecord


@dataclass
class FabricSummary:
    id: str
    nodes: tuple[str, ...]
    # model -> state -> count (all states present, zeros included, so clients need no defaults)
    models: dict[str, dict[str, int]] = field(default_factory=dict)


def _error(operation: Operation, reason: str, message: str, at: float) -> dict[str, Any]:
    return {"operation": str(operation), "reason": reason, "message": message, "at": at}


class FabricManager:
    def __init__(
        self,
        config: FabricConfig,
        store: Store,
        *,
        attach_seconds: float | None = None,
        detach_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store = store
        self.attach_seconds = config.attach_seconds if attach_seconds is None else attach_seconds
        self.detach_seconds = config.detach_seconds if detach_seconds is None else detach_seconds
        self.faults = FaultBook()
        self._clock = clock
        self._ops: dict[str, OperationInfo] = {}
        self._tasks: dict[str, asyncio.Task[DeviceRecord]] = {}
        self._node_fabrics: dict[str, set[str]] = {}
        for fabric, nodes in config.fabrics.items():
            for node in nodes:
                self._node_fabrics.setdefault(node, set()).add(fabric)
        try:
            # Settle before syncing, so a device whose attach was interrupted counts as free for the inventory check.
            self.settled_at_start = store.settle_interrupted(clock())
            for record in self.settled_at_start:
                log.warning("settled interrupted %s of %s (%s) to free", record.state, record.name, record.uuid)
            store.sync_inventory(config.devices, config.fabrics)
        except BaseException:
            store.close()  # releases the state file's lock for the next attempt
            raise

    def close(self) -> None:
        self.store.close()

    # --- lookups ------------------------------------------------------------------------------------------

    def device(self, device_uuid: str) -> DeviceRecord:
        record = self.store.get(device_uuid)
        if record is None:
            raise FabricError(404, "device_not_found", f"no device with uuid {device_uuid!r}")
        return record

    def check_device_exists(self, device_uuid: str) -> None:
        if self.store.get(device_uuid) is None:
            raise FabricError(422, "unknown_device", f"no device with uuid {device_uuid!r}")

    def _check_node(self, record: DeviceRecord, node: str) -> None:
        fabrics = self._node_fabrics.get(node)
        if fabrics is None:
            raise FabricError(422, "unknown_node", f"node {node!r} is not on any fabric")
        if record.fabric not in fabrics:
            raise FabricError(
                422,
                "node_not_on_fabric",
                f"node {node!r} is not on fabric {record.fabric!r} of device {record.name}",
                fabric=record.fabric,
                nodeFabrics=sorted(fabrics),
            )

    def operation_of(self, device_uuid: str) -> OperationInfo | None:
        return next((op for op in self._ops.values() if op.device == device_uuid), None)

    def operations(self) -> list[OperationInfo]:
        return list(self._ops.values())

    def hung_operations(self) -> list[OperationInfo]:
        return [op for op in self._ops.values() if op.hung]

    def check_selectors(self, model: str | None, fabric: str | None, node: str | None) -> None:
        """Fault selectors must name something the fabric has (a typo must not arm a fault that never fires)."""
        if model is not None and model not in {d.model for d in self.config.devices}:
            raise FabricError(422, "unknown_model", f"no device of model {model!r}")
        if fabric is not None and fabric not in self.config.fabrics:
            raise FabricError(422, "unknown_fabric", f"no fabric {fabric!r}")
        if node is not None and node not in self._node_fabrics:
            raise FabricError(422, "unknown_node", f"node {node!r} is not on any fabric")

    def fabrics(self) -> list[FabricSummary]:
        summaries = {fabric: FabricSummary(fabric, nodes) for fabric, nodes in self.config.fabrics.items()}
        for fabric, model, state, n in self.store.counts():
            summary = summaries.get(fabric)
            if summary is None:
                continue
            counts = summary.models.setdefault(model, {str(s): 0 for s in DeviceState} | {"total": 0})
            counts[state] += n
            counts["total"] += n
        return list(summaries.values())

    # --- operations ---------------------------------------------------------------------------------------

    async def attach(self, device_uuid: str, node: str) -> OperationResult:
        record = self.device(device_uuid)
        self._check_node(record, node)
        op = OperationInfo(uuid.uuid4().hex, Operation.ATTACH, device_uuid, node, self._clock())
        self._reachable(op, record)
        if not self.store.begin_attach(device_uuid, node, op.id, op.started_at):
            # Lost the reservation: decide from the state that won. No await since begin_attach, so it is current.
            current = self.device(device_uuid)
            if current.state is DeviceState.ATTACHED and current.node == node:
                return OperationResult(False, current)
            if current.state is DeviceState.ATTACHED:
                raise FabricError(
                    409, "attached_elsewhere", f"device {current.name} is attached to {current.node}", device=current
                )
            raise FabricError(
                409,
                "operation_in_progress",
                f"device {current.name} is {current.state} (node {current.node}); retry when it settles",
                device=current,
            )
        return OperationResult(True, await self._run(op))

    async def detach(self, device_uuid: str, node: str | None = None) -> OperationResult:
        record = self.device(device_uuid)
        if node is not None:
            self._check_node(record, node)
        self._reachable(
            OperationInfo(uuid.uuid4().hex, Operation.DETACH, device_uuid, record.node or node or "", self._clock()),
            record,
        )
        if record.state is DeviceState.FREE:
            return OperationResult(False, record)
        if record.state is DeviceState.ATTACHED and node is not None and record.node != node:
            raise FabricError(
                409,
                "attached_elsewhere",
                f"device {record.name} is attached to {record.node}, not {node}",
                device=record,
            )
        op = OperationInfo(uuid.uuid4().hex, Operation.DETACH, device_uuid, record.node or "", self._clock())
        if record.state is not DeviceState.ATTACHED or not self.store.begin_detach(
            device_uuid, op.node, op.id, op.started_at
        ):
            current = self.device(device_uuid)
            if current.state is DeviceState.FREE:
                return OperationResult(False, current)
            raise FabricError(
                409,
                "operation_in_progress",
                f"device {current.name} is {current.state} (node {current.node}); retry when it settles",
                device=current,
            )
        return OperationResult(True, await self._run(op))

    async def _run(self, op: OperationInfo) -> DeviceRecord:
        self._ops[op.id] = op
        task = asyncio.create_task(self._execute(op), name=f"{op.operation}-{op.device}")
        self._tasks[op.id] = task
        task.add_done_callback(self._forget)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():  # interrupted by shutdown, not by our caller
                current = self.store.get(op.device)
                raise FabricError(
                    503,
                    "interrupted",
                    f"{op.operation} of {op.device} was interrupted because the fabric manager is stopping; "
                    "the device was settled to free",
                    device=current,
                ) from None
            raise

    def _reachable(self, op: OperationInfo, record: DeviceRecord) -> None:
        """Refuse the operation, doing nothing, while an `unreachable` fault selects it."""
        target = Target(op.device, record.name, record.fabric, record.model, op.node)
        fault = self.faults.refuse(op.operation, target, op.id, self._clock())
        if fault is not None:
            raise FabricError(
                503, "fabric_unreachable", f"the fabric is out of reach for {record.name} ({fault.id})", device=record
            )

    def _forget(self, task: asyncio.Task[DeviceRecord]) -> None:
        for op_id, known in list(self._tasks.items()):
            if known is task:
                del self._tasks[op_id]
                self._ops.pop(op_id, None)
        # Retrieve the outcome so a failure nobody awaited (client gone) is not logged as "never retrieved".
        if not task.cancelled():
            task.exception()

    async def _execute(self, op: OperationInfo) -> DeviceRecord:
        record = self.device(op.device)
        target = Target(op.device, record.name, record.fabric, record.model, op.node)
        fault = op.fault = self.faults.take(op.operation, target, op.id, self._clock())
        failure: tuple[str, str] | None = None
        try:
            if fault is not None and fault.mode is FaultMode.HANG:
                op.released = asyncio.get_running_loop().create_future()
                log.info("%s of %s hangs (%s) until released", op.operation, op.device, fault.id)
                release = op.release = await op.released
                if release.outcome == "fail":
                    failure = (release.reason, release.message)
            else:
                delay = self.attach_seconds if op.operation is Operation.ATTACH else self.detach_seconds
                if fault is not None and fault.mode is FaultMode.SLOW:
                    delay += fault.delay_seconds
                if delay > 0:
                    await asyncio.sleep(delay)
                if fault is not None and fault.mode is FaultMode.FAIL:
                    failure = (fault.reason, fault.message)
        except asyncio.CancelledError:
            self._settle_interrupted(op)
            raise
        return self._finish(op, failure)

    def _finish(self, op: OperationInfo, failure: tuple[str, str] | None) -> DeviceRecord:
        now = self._clock()
        if op.operation is Operation.ATTACH:
            if failure is None:
                ok = self.store.finish_attach(op.device, op.id, op.node, now)
            else:
                ok = self.store.fail_attach(op.device, op.id, _error(op.operation, *failure, now), now)
        elif failure is None:
            ok = self.store.finish_detach(op.device, op.id, now)
        else:
            ok = self.store.fail_detach(op.device, op.id, op.node, _error(op.operation, *failure, now), now)
        current = self.device(op.device)
        if not ok:
            # Only possible if another process rewrote the row under us; report rather than guess.
            raise FabricError(
                409, "state_conflict", f"device {current.name} changed state during the {op.operation}", device=current
            )
        if failure is not None:
            reason, message = failure
            raise FabricError(
                503,
                f"{op.operation}_failed",
                f"{op.operation} of {current.name} to {op.node} failed: {message}",
                reason=reason,
                device=current,
            )
        return current

    def _settle_interrupted(self, op: OperationInfo) -> None:
        # Same rule as after a crash (Store.settle_interrupted): attach rolls back, detach completes; both free.
        now = self._clock()
        verb = "rolled back" if op.operation is Operation.ATTACH else "completed"
        error = _error(op.operation, "Interrupted", f"{op.operation} to {op.node} interrupted by shutdown; {verb}", now)
        if op.operation is Operation.ATTACH:
            self.store.fail_attach(op.device, op.id, error, now)
        else:
            self.store.finish_detach(op.device, op.id, now, error)

    # --- fault control ------------------------------------------------------------------------------------

    def release(
        self, device: str | None, outcome: ReleaseOutcome, reason: str, message: str, fault: str | None = None
    ) -> list[OperationInfo]:
        """Let hung operations go on (all, those of one device and/or one fault); returns the ones released."""
        released = []
        for op in self.hung_operations():
            if device in (None, op.device) and fault in (None, op.fault.id if op.fault else None):
                assert op.released is not None
                op.released.set_result(Release(outcome, reason, message))
                released.append(op)
        return released

    async def interrupt_all(self) -> int:
        """Cancel every operation in flight (shutdown); each settles to a defined state before this returns."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
            log.warning("interrupted %d operation(s) in flight", len(tasks))
        return len(tasks)
