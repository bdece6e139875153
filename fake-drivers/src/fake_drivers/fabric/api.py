"""JSON shapes of the HTTP API: request validation and response rendering (camelCase, like Kubernetes)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from .faults import Fault, FaultMode, Operation
from .manager import FabricSummary, OperationInfo
from .store import DeviceRecord, DeviceState, Use

# A metav1.Condition reason: a controller may copy an injected reason straight into a claim's device condition.
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
Reason = Annotated[str, Field(pattern=CONDITION_REASON, max_length=1024)]
Message = Annotated[str, Field(max_length=32768)]
Name = Annotated[str, Field(min_length=1, max_length=253)]


class _Shape(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True)


class _Request(_Shape):
    # Unknown keys are refused: "nodeName" instead of "node" must not attach to a default.
    model_config = ConfigDict(extra="forbid")


def timestamp(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# --- requests ---------------------------------------------------------------------------------------------


class AttachRequest(_Request):
    node: Name


class UseRequest(_Request):
    claim: Name = Field(description="the ResourceClaim's uid the node prepared the device for")
    node: Name = Field(description="the node that prepared it; the device must be attached there")


class DetachRequest(_Request):
    node: Name | None = Field(default=None, description="if given, detach only if attached to this node")


class FaultRequest(_Request):
    mode: FaultMode
    operation: Operation = Operation.ATTACH
    device: str | None = Field(default=None, description="device uuid; omitted or null: any device")
    # Selectors for a client that cannot know the physical device in advance (count-based pools): the fault
    # applies to an operation that matches every selector given; GET /v1/faults/{id} shows what it hit.
    model: Name | None = Field(default=None, description="only devices of this model")
    fabric: Name | None = Field(default=None, description="only devices of this fabric")
    node: Name | None = Field(default=None, description="only attaches to (detaches from) this node")
    count: int = Field(default=1, ge=1, le=1_000_000, description="how many operations the fault applies to")
    reason: Reason | None = Field(default=None, description="mode fail: failure reason (condition reason syntax)")
    message: Message | None = Field(default=None, description="mode fail: failure message")
    delay_seconds: float | None = Field(default=None, gt=0, le=3600, description="mode slow: extra seconds")

    @model_validator(mode="after")
    def _fields_fit_mode(self) -> FaultRequest:
        if self.mode is FaultMode.SLOW and self.delay_seconds is None:
            raise ValueError("mode slow needs delaySeconds")
        if self.mode is not FaultMode.SLOW and self.delay_seconds is not None:
            raise ValueError("delaySeconds is only used by mode slow")
        if self.mode is not FaultMode.FAIL and (self.reason is not None or self.message is not None):
            raise ValueError("reason and message are only used by mode fail (a hung operation gets them on release)")
        return self


class ReleaseRequest(_Request):
    device: str | None = Field(default=None, description="release only this device's hung operation")
    fault: str | None = Field(default=None, description="release only the operations this fault made hang")
    outcome: Literal["complete", "fail"] = "complete"
    reason: Reason | None = None
    message: Message | None = None

    @model_validator(mode="after")
    def _reason_only_on_fail(self) -> ReleaseRequest:
        if self.outcome == "complete" and (self.reason is not None or self.message is not None):
            raise ValueError("reason and message are only used with outcome fail")
        return self


# --- responses --------------------------------------------------------------------------------------------


class ErrorOut(_Shape):
    error: str
    message: str


class LastErrorOut(_Shape):
    operation: Operation
    reason: str
    message: str
    at: datetime


class OperationOut(_Shape):
    id: str
    operation: Operation
    node: str
    started_at: datetime
    hung: bool
    fault: str | None


class UseOut(_Shape):
    claim: str = Field(description="ResourceClaim uid")
    node: str
    since: datetime


class DeviceOut(_Shape):
    uuid: str
    name: str
    fabric: str
    model: str
    index: int
    attributes: dict[str, Any]
    state: DeviceState
    node: str | None = Field(description="attached node, or the target/source node of the operation in flight")
    state_since: datetime
    generation: int = Field(description="increases on every state change")
    operation: OperationOut | None = None
    last_error: LastErrorOut | None = None
    uses: list[UseOut] = Field(
        default_factory=list,
        description="claims the node's driver prepared the device for and has not unprepared yet (kubelet path)",
    )


class OperationResultOut(_Shape):
    changed: bool = Field(description="false: nothing to do (already attached there / already free)")
    device: DeviceOut


class DeviceListOut(_Shape):
    devices: list[DeviceOut]


class AttachmentOut(_Shape):
    device: str = Field(description="device uuid")
    name: str
    fabric: str
    model: str
    node: str
    state: DeviceState
    since: datetime


class FreeOut(_Shape):
    fabric: str
    model: str
    free: int = Field(description="physical devices of this model on this fabric that are free")
    total: int
    nodes: list[str] = Field(description="the nodes this fabric reaches")


class AttachmentListOut(_Shape):
    attachments: list[AttachmentOut]
    free: list[FreeOut] = Field(description="free devices per fabric and model (count-based pools check against it)")


class ReadinessOut(_Shape):
    device: str = Field(description="the device's identity (uuid), as its node-local slice entry publishes it")
    name: str
    node: str | None = Field(description="the node it is ready on, or being readied on; null when neither")
    ready: bool = Field(description="prepared on `node` and usable there")
    state: Literal["unprepared", "preparing", "ready", "unpreparing"]
    since: datetime = Field(description="when it entered this state (ready: since when it is ready)")


class ReadinessListOut(_Shape):
    devices: list[ReadinessOut]


class FabricOut(_Shape):
    id: str
    nodes: list[str]
    models: dict[str, dict[str, int]] = Field(description="model -> device count per state, plus total")


class FabricListOut(_Shape):
    fabrics: list[FabricOut]


class HitOut(_Shape):
    operation_id: str
    device: str = Field(description="uuid of the device the operation was for")
    name: str
    fabric: str
    model: str
    node: str
    at: datetime


class FaultOut(_Shape):
    id: str
    operation: Operation
    mode: FaultMode
    device: str | None
    model: str | None
    fabric: str | None
    node: str | None
    remaining: int
    used: int
    reason: str | None
    message: str | None
    delay_seconds: float | None
    created_at: datetime
    hits: list[HitOut] = Field(description="the operations it applied to, oldest first")


class HungOut(_Shape):
    id: str
    operation: Operation
    device: str
    node: str
    started_at: datetime
    fault: str | None


class FaultListOut(_Shape):
    faults: list[FaultOut]
    hung: list[HungOut]


class ClearedOut(_Shape):
    cleared: int


class UsesRemovedOut(_Shape):
    removed: int = Field(description="devices the claim was marked on")


class ReleasedOut(_Shape):
    released: list[HungOut]


class HealthOut(_Shape):
    status: Literal["ok"]
    devices: int
    in_flight: int
    settled_at_start: int = Field(description="operations found in flight at start and settled to free")


# --- rendering --------------------------------------------------------------------------------------------


_READINESS_STATES: dict[DeviceState, Literal["unprepared", "preparing", "ready", "unpreparing"]] = {
    DeviceState.FREE: "unprepared",
    DeviceState.ATTACHING: "preparing",
    DeviceState.ATTACHED: "ready",
    DeviceState.DETACHING: "unpreparing",
}


def readiness_out(record: DeviceRecord) -> ReadinessOut:
    """A device as the readiness probe reports it: readying a node-local device is an attach to its one node."""
    return ReadinessOut(
        device=record.uuid,
        name=record.name,
        node=record.node,
        ready=record.state is DeviceState.ATTACHED,
        state=_READINESS_STATES[record.state],
        since=timestamp(record.state_since),
    )


def device_out(record: DeviceRecord, op: OperationInfo | None = None, uses: list[Use] | None = None) -> DeviceOut:
    last_error = None
    if record.last_error:
        last_error = LastErrorOut(**{**record.last_error, "at": timestamp(record.last_error["at"])})
    operation = None
    if op is not None and record.state in (DeviceState.ATTACHING, DeviceState.DETACHING):
        operation = OperationOut(
            id=op.id,
            operation=op.operation,
            node=op.node,
            started_at=timestamp(op.started_at),
            hung=op.hung,
            fault=op.fault.id if op.fault else None,
        )
    return DeviceOut(
        uuid=record.uuid,
        name=record.name,
        fabric=record.fabric,
        model=record.model,
        index=record.index,
        attributes=record.attributes,
        state=record.state,
        node=record.node,
        state_since=timestamp(record.state_since),
        generation=record.generation,
        operation=operation,
        uses=[UseOut(claim=u.claim, node=u.node, since=timestamp(u.since)) for u in uses or []],
        last_error=last_error,
    )


def attachment_out(record: DeviceRecord) -> AttachmentOut:
    assert record.node is not None
    return AttachmentOut(
        device=record.uuid,
        name=record.name,
        fabric=record.fabric,
        model=record.model,
        node=record.node,
        state=record.state,
        since=timestamp(record.state_since),
    )


def free_out(summaries: list[FabricSummary]) -> list[FreeOut]:
    return [
        FreeOut(fabric=s.id, model=model, free=counts["free"], total=counts["total"], nodes=list(s.nodes))
        for s in summaries
        for model, counts in sorted(s.models.items())
    ]


def fabric_out(summary: FabricSummary) -> FabricOut:
    return FabricOut(id=summary.id, nodes=list(summary.nodes), models=summary.models)


def fault_out(fault: Fault) -> FaultOut:
    return FaultOut(
        id=fault.id,
        operation=fault.operation,
        mode=fault.mode,
        device=fault.device,
        model=fault.model,
        fabric=fault.fabric,
        node=fault.node,
        remaining=fault.remaining,
        used=fault.used,
        reason=fault.reason if fault.mode is FaultMode.FAIL else None,
        message=fault.message if fault.mode is FaultMode.FAIL else None,
        delay_seconds=fault.delay_seconds if fault.mode is FaultMode.SLOW else None,
        created_at=timestamp(fault.created_at),
        hits=[
            HitOut(
                operation_id=hit.operation_id,
                device=hit.target.device,
                name=hit.target.name,
                fabric=hit.target.fabric,
                model=hit.target.model,
                node=hit.target.node,
                at=timestamp(hit.at),
            )
            for hit in fault.hits
        ],
    )


def hung_out(op: OperationInfo) -> HungOut:
    return HungOut(
        id=op.id,
        operation=op.operation,
        device=op.device,
        node=op.node,
        started_at=timestamp(op.started_at),
        fault=op.fault.id if op.fault else None,
    )
