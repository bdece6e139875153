"""A local HTTP server that answers every GET with JSON: the stand-in endpoint (fabric probe, readiness probe) of unit
tests of the suite's HTTP readers. `answer` gets the request's handler (its path and headers) and returns the JSON."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[BaseHTTPRequestHandler], Any]


def json_handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answer(self)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            """Quiet: the tests read their own output."""

    return Handler


@contextmanager
def serving(answer: Answer, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """Serve `answer` on a free port of 127.0.0.1 (over TLS with `tls`) while inside; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), json_handler(answer))
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
