"""What the node driver asks the fabric manager: which devices are attached where (the hot-plug events)."""

from __future__ import annotations

import httpx

from .slices import AttachedDevice


class FabricUnavailable(RuntimeError):
    """The fabric manager did not answer; the driver keeps what it published and tries again."""


class FabricClient:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self._http = httpx.Client(base_url=url, timeout=timeout)

    def attached(self) -> list[AttachedDevice]:
        """Devices whose attach has completed. An attach in progress is not hot-plugged yet."""
        try:
            response = self._http.get("/v1/devices", params={"state": "attached"})
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise FabricUnavailable(f"fabric manager {self._http.base_url}: {exc}") from exc
        return [
            AttachedDevice(d["name"], d["uuid"], d["model"], d.get("attributes", {}), node=d["node"])
            for d in response.json()["devices"]
        ]

    def close(self) -> None:
        self._http.close()
