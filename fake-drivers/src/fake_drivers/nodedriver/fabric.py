"""What the node driver asks the fabric manager: which devices are attached where (the hot-plug events)."""

from __future__ import annotations

import ssl

import httpx

from .slices import AttachedDevice


class FabricUnavailable(RuntimeError):
    """The fabric manager did not answer; the driver keeps what it published and tries again."""


class FabricClient:
    def __init__(self, url: str, timeout: float = 5.0, ca_file: str | None = None) -> None:
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        self._http = httpx.Client(base_url=url, timeout=timeout, verify=verify)

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
