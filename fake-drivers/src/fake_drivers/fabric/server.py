"""Running the service: uvicorn with a port file, a clean stop of hung operations, and a thread runner.

The thread runner starts a real HTTP server on loopback inside the current process; tests and the benchmark
use it so they exercise sockets and the event loop, not an in-process test client.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType

import uvicorn

from .manager import FabricManager
from .service import create_app

DEFAULT_HOST = "127.0.0.1"  # loopback only: the fabric manager has no authentication


class FabricServer(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        manager: FabricManager,
        port_file: str | Path | None = None,
        announce: bool = False,
    ) -> None:
        super().__init__(config)
        self.manager = manager
        self.port_file = Path(port_file) if port_file else None
        self.announce = announce
        self.port: int | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        self.port = self.servers[0].sockets[0].getsockname()[1]
        if self.port_file is not None:
            # Written only once the socket listens, atomically, so a harness that sees the file can connect.
            tmp = self.port_file.with_name(self.port_file.name + ".tmp")
            tmp.write_text(f"{self.port}\n", encoding="utf-8")
            os.replace(tmp, self.port_file)
        if self.announce:
            # One stable stdout line a harness can parse, whatever the log settings.
            scheme = "https" if self.config.ssl_certfile else "http"
            print(f"fake-fabric-manager listening on {scheme}://{self.config.host}:{self.port}", flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn waits for open requests before the app's lifespan shutdown; a hung attach would block it forever.
        # Interrupt operations first: each settles to free and its request answers 503 "interrupted".
        await self.manager.interrupt_all()
        await super().shutdown(sockets)


def build_server(
    manager: FabricManager,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    port_file: str | Path | None = None,
    log_level: str = "info",
    access_log: bool = True,
    configure_logging: bool = True,
    announce: bool = False,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
) -> FabricServer:
    """`tls_cert`/`tls_key`: serve HTTPS with this certificate (e.g. one of the harness's run CA)."""
    config = uvicorn.Config(
        create_app(manager),
        ssl_certfile=str(tls_cert) if tls_cert else None,
        ssl_keyfile=str(tls_key) if tls_key else None,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        # None keeps the caller's logging setup (tests, embedding); uvicorn's default config otherwise.
        log_config=uvicorn.config.LOGGING_CONFIG if configure_logging else None,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    return FabricServer(config, manager, port_file, announce)


class ServerThread:
    """Run a FabricServer in a background thread: ``with ServerThread(manager) as srv: srv.url``."""

    def __init__(self, manager: FabricManager, *, host: str = DEFAULT_HOST, port: int = 0, timeout: float = 10.0):
        self.server = build_server(
            manager, host=host, port=port, log_level="warning", access_log=False, configure_logging=False
        )
        self.timeout = timeout
        self._thread = threading.Thread(target=self.server.run, name="fake-fabric-manager", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.server.config.host}:{self.server.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self.timeout
        while self.server.port is None:
            if not self._thread.is_alive():
                raise RuntimeError("fabric manager thread exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"fabric manager did not start within {self.timeout} s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(self.timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"fabric manager did not stop within {self.timeout} s")

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
