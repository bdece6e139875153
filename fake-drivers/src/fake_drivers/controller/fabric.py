"""The fabric manager's HTTP API, as the controller uses it: read devices, attach, detach."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import httpx

from .model import FabricDevice


class FabricUnavailable(RuntimeError):
    """The fabric manager did not answer; the reconciler keeps everything as it is and tries again."""


@dataclass(frozen=True)
class Outcome:
    """How one attach/detach ended. `failed` is a refusal of the fabric (the device is not usable there);
    anything else not `ok` (timeout, busy, moved) just means: look at the fabric again."""

    ok: bool
    failed: bool = False
    error: str = ""
    reason: str = ""
    message: str = ""


# Fabric errors that mean the device cannot be attached to that node (as opposed to "busy, try later").
ATTACH_REFUSALS = {"attach_failed", "node_not_on_fabric", "unknown_node"}
REASONS = {"node_not_on_fabric": "NodeNotOnFabric", "unknown_node": "UnknownNode"}


class FabricClient:
    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        operation_timeout: float = 60.0,
        connections: int = 100,
        ca_file: str | None = None,
    ) -> None:
        # One connection per worker: an operation holds its connection for the whole attach time, so fewer
        # connections than workers would queue attaches in the connection pool (and time out there).
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        self._http = httpx.Client(base_url=url, timeout=timeout, limits=limits, verify=verify)
        self._operation_timeout = operation_timeout

    def devices(self) -> list[FabricDevice]:
        try:
            response = self._http.get("/v1/devices")
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise FabricUnavailable(f"fabric manager {self._http.base_url}: {exc}") from exc
        return [FabricDevice.from_api(d) for d in response.json()["devices"]]

    def attach(self, uuid: str, node: str) -> Outcome:
        return self._operation(f"/v1/devices/{uuid}/attach", {"node": node})

    def detach(self, uuid: str, node: str | None) -> Outcome:
        # With the node: detach only if it is still attached there (never detach someone else's attach).
        return self._operation(f"/v1/devices/{uuid}/detach", {"node": node} if node else None)

    def _operation(self, path: str, body: dict[str, str] | None) -> Outcome:
        # The call returns when the operation is over; a hung one outlives the timeout, and the fabric finishes
        # it anyway: the reconciler then sees the device's state, not this call's result.
        try:
            response = self._http.post(path, json=body, timeout=self._operation_timeout)
        except httpx.HTTPError as exc:
            return Outcome(ok=False, error=type(exc).__name__, message=str(exc))
        if response.status_code == 200:
            return Outcome(ok=True)
        try:
            data = response.json()
        except ValueError:
            data = {}
        error = data.get("error", str(response.status_code))
        return Outcome(
            ok=False,
            failed=error in ATTACH_REFUSALS,
            error=error,
            reason=data.get("reason") or REASONS.get(error, "AttachFailed"),
            message=data.get("message", response.text[:1000]),
        )

    def close(self) -> None:
        self._http.close()
