"""FastAPI app of the fabric manager: routes, and one JSON error shape for every refusal."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from . import api
from .manager import FabricError, FabricManager
from .store import DeviceRecord, DeviceState, Use

log = logging.getLogger(__name__)

_ERRORS = {400: {"model": api.ErrorOut}, 404: {"model": api.ErrorOut}, 422: {"model": api.ErrorOut}}
_OPERATION_ERRORS = {**_ERRORS, 409: {"model": api.ErrorOut}, 503: {"model": api.ErrorOut}}

# Telemetry off: the fake must not talk to anything but its clients, and spans would only slow it down.
_NO_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": code, "message": message, **extra})


def _jsonable(value: Any, manager: FabricManager) -> Any:
    if isinstance(value, DeviceRecord):
        return api.device_out(value, manager.operation_of(value.uuid)).model_dump(mode="json")
    return value


def create_app(manager: FabricManager) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        # FabricServer interrupts earlier (before uvicorn waits for connections); this covers other ASGI servers.
        await manager.interrupt_all()

    app = FastAPI(
        title="fake fabric manager",
        version=__version__,
        description="Owns which fabric device is attached to which node; fault injection for conformance tests.",
        lifespan=lifespan,
        telemetry=_NO_TELEMETRY,
        # No Swagger/ReDoc pages (they pull assets from a CDN); the schema stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.state.manager = manager

    @app.exception_handler(FabricError)
    async def _fabric_error(_: Request, exc: FabricError) -> JSONResponse:
        extra = {key: _jsonable(value, manager) for key, value in exc.extra.items()}
        return _error(exc.status, exc.code, exc.message, **extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if any(error.get("type") == "json_invalid" for error in errors):
            return _error(400, "malformed_json", "request body is not valid JSON")
        content_type = request.headers.get("content-type", "")
        body_errors = [error for error in errors if tuple(error.get("loc", ()))[:1] == ("body",)]
        if body_errors and content_type and "json" not in content_type:
            return _error(
                415, "unsupported_media_type", f"send JSON with Content-Type: application/json, not {content_type}"
            )
        details = [
            {"location": ".".join(str(part) for part in error.get("loc", ())), "problem": error.get("msg", "")}
            for error in errors
        ]
        summary = "; ".join(f"{detail['location']}: {detail['problem']}" for detail in details)
        return _error(422, "invalid_request", summary, details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail))

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _error(500, "internal_error", f"{type(exc).__name__}: {exc}")

    def render(record: DeviceRecord, uses: dict[str, list[Use]] | None = None) -> api.DeviceOut:
        found = manager.store.uses(record.uuid) if uses is None else uses
        return api.device_out(record, manager.operation_of(record.uuid), found.get(record.uuid))

    # --- probe ------------------------------------------------------------------------------------------

    @app.get("/healthz", response_model=api.HealthOut, tags=["probe"])
    async def healthz() -> api.HealthOut:
        manager.store.ping()
        return api.HealthOut(
            status="ok",
            devices=len(manager.store.find()),
            in_flight=len(manager.operations()),
            settled_at_start=len(manager.settled_at_start),
        )

    @app.get("/v1/attachments", response_model=api.AttachmentListOut, tags=["probe"])
    async def attachments(fabric: str | None = None, node: str | None = None) -> api.AttachmentListOut:
        """Every device that is not free: attached, or with an attach/detach in flight."""
        in_use = (DeviceState.ATTACHING, DeviceState.ATTACHED, DeviceState.DETACHING)
        records = manager.store.find(fabric=fabric, node=node, states=in_use)
        # Free counts of the fabrics asked about: `node` selects the fabrics that reach it.
        summaries = [s for s in manager.fabrics() if fabric in (None, s.id) and (node is None or node in s.nodes)]
        return api.AttachmentListOut(
            attachments=[api.attachment_out(record) for record in records], free=api.free_out(summaries)
        )

    @app.get("/v1/readiness", response_model=api.ReadinessListOut, tags=["readiness"])
    async def readiness(node: str | None = None) -> api.ReadinessListOut:
        """Node-local readiness (bindingModel node-local): per device, whether it is ready, on which node, since when.
        The reference readies a node-local device by attaching it to its one node (a fabric per node)."""
        records = manager.store.find()
        if node is not None:  # the devices that can be readied there (a fabric per node, in the reference)
            records = [r for r in records if node in manager.config.fabrics.get(r.fabric, ())]
        return api.ReadinessListOut(devices=[api.readiness_out(record) for record in records])

    @app.get("/v1/fabrics", response_model=api.FabricListOut, tags=["probe"])
    async def fabrics() -> api.FabricListOut:
        return api.FabricListOut(fabrics=[api.fabric_out(summary) for summary in manager.fabrics()])

    # --- devices ----------------------------------------------------------------------------------------

    @app.get("/v1/devices", response_model=api.DeviceListOut, tags=["devices"])
    async def devices(
        fabric: str | None = None,
        model: str | None = None,
        node: str | None = None,
        state: Annotated[list[DeviceState] | None, Query()] = None,
    ) -> api.DeviceListOut:
        records = manager.store.find(fabric=fabric, model=model, node=node, states=state)
        uses = manager.store.uses()
        return api.DeviceListOut(devices=[render(record, uses) for record in records])

    @app.get("/v1/devices/{device}", response_model=api.DeviceOut, responses=_ERRORS, tags=["devices"])
    async def device(device: str) -> api.DeviceOut:
        return render(manager.device(device))

    @app.post(
        "/v1/devices/{device}/attach",
        response_model=api.OperationResultOut,
        responses=_OPERATION_ERRORS,
        tags=["devices"],
    )
    async def attach(device: str, request: api.AttachRequest) -> api.OperationResultOut:
        """Attach and return when done: 200 attached (or already attached there), 409 busy, 503 failed."""
        result = await manager.attach(device, request.node)
        return api.OperationResultOut(changed=result.changed, device=render(result.device))

    @app.post(
        "/v1/devices/{device}/detach",
        response_model=api.OperationResultOut,
        responses=_OPERATION_ERRORS,
        tags=["devices"],
    )
    async def detach(
        device: str, request: Annotated[api.DetachRequest | None, Body()] = None
    ) -> api.OperationResultOut:
        """Detach and return when done: 200 free (or already free), 409 busy or attached elsewhere, 503 failed."""
        result = await manager.detach(device, request.node if request else None)
        return api.OperationResultOut(changed=result.changed, device=render(result.device))

    # --- what the nodes use (the kubelet path) -----------------------------------------------------------

    @app.post("/v1/devices/{device}/uses", response_model=api.DeviceOut, responses=_OPERATION_ERRORS, tags=["uses"])
    async def add_use(device: str, request: api.UseRequest) -> api.DeviceOut:
        """The node's driver prepared the device for a claim (NodePrepareResources): 200, or 409 when the device is
        not attached to that node (nothing is marked)."""
        record = manager.device(device)
        if not manager.store.add_use(device, request.claim, request.node, time.time()):
            raise FabricError(
                409,
                "not_attached_here",
                f"device {device} is {record.state} {record.node or ''}, not attached to {request.node}".strip(),
            )
        return render(manager.device(device))

    @app.delete("/v1/uses/{claim}", response_model=api.UsesRemovedOut, tags=["uses"])
    async def remove_uses(claim: str) -> api.UsesRemovedOut:
        """The node's driver unprepared the claim (NodeUnprepareResources): its devices are no longer used."""
        return api.UsesRemovedOut(removed=manager.store.remove_uses(claim))

    # --- fault injection --------------------------------------------------------------------------------

    @app.get("/v1/faults", response_model=api.FaultListOut, tags=["faults"])
    async def faults() -> api.FaultListOut:
        return api.FaultListOut(
            faults=[api.fault_out(fault) for fault in manager.faults.list()],
            hung=[api.hung_out(op) for op in manager.hung_operations()],
        )

    @app.post("/v1/faults", status_code=201, response_model=api.FaultOut, responses=_ERRORS, tags=["faults"])
    async def add_fault(request: api.FaultRequest) -> api.FaultOut:
        """Arm a fault for the next `count` matching operations (device-specific faults win over any-device)."""
        if request.device is not None:
            manager.check_device_exists(request.device)
        manager.check_selectors(request.model, request.fabric, request.node)
        fault = manager.faults.add(
            operation=request.operation,
            mode=request.mode,
            device=request.device,
            count=request.count,
            reason=request.reason or "InjectedFailure",
            message=request.message or f"injected {request.operation} failure",
            delay_seconds=request.delay_seconds or 0.0,
            model=request.model,
            fabric=request.fabric,
            node=request.node,
        )
        return api.fault_out(fault)

    @app.get("/v1/faults/{fault}", response_model=api.FaultOut, responses=_ERRORS, tags=["faults"])
    async def get_fault(fault: str) -> api.FaultOut:
        """An armed fault, or one used up or disarmed (kept for reading): which operations it hit."""
        found = manager.faults.get(fault)
        if found is None:
            raise FabricError(404, "fault_not_found", f"no fault {fault!r}")
        return api.fault_out(found)

    @app.delete("/v1/faults", response_model=api.ClearedOut, tags=["faults"])
    async def clear_faults() -> api.ClearedOut:
        """Disarm every fault. Operations already hung stay hung: release them with /v1/faults/release."""
        return api.ClearedOut(cleared=manager.faults.clear())

    @app.delete("/v1/faults/{fault}", response_model=api.FaultOut, responses=_ERRORS, tags=["faults"])
    async def delete_fault(fault: str) -> api.FaultOut:
        removed = manager.faults.remove(fault)
        if removed is None:
            raise FabricError(404, "fault_not_found", f"no armed fault {fault!r}")
        return api.fault_out(removed)

    @app.post("/v1/faults/release", response_model=api.ReleasedOut, responses=_ERRORS, tags=["faults"])
    async def release(request: Annotated[api.ReleaseRequest | None, Body()] = None) -> api.ReleasedOut:
        """Release hung operations (all, or one device's): they complete, or fail with the given reason."""
        request = request or api.ReleaseRequest()
        if request.device is not None:
            manager.check_device_exists(request.device)
        if request.fault is not None and manager.faults.get(request.fault) is None:
            raise FabricError(404, "fault_not_found", f"no fault {request.fault!r}")
        released = manager.release(
            request.device,
            request.outcome,
            request.reason or "ReleasedAsFailed",
            request.message or "hung operation released as failed",
            request.fault,
        )
        return api.ReleasedOut(released=[api.hung_out(op) for op in released])

    return app
