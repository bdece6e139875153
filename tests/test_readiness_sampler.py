"""The readiness sampler (observe/readiness.py) samples a device leased after it started once told to
(small-pool-churn's device leased on purpose: its readiness was never sampled, and RDY-3/IMP-28 failed "the probe gave
no answer").
A local HTTP server plays the probe; no cluster."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conformance.observe.readiness import ReadinessSampler

ANSWER = {
    "devices": [
        {"device": "a", "node": "node-0", "ready": True, "since": "2026-12-07T00:00:00Z"},
        {"device": "b", "node": "node-0", "ready": True, "since": "2026-12-07T00:00:00Z"},
    ]
}


class _Probe(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Probe)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1/readiness"
    server.shutdown()


def test_a_device_added_later_is_sampled_from_then_on(url: str) -> None:
    sampler = ReadinessSampler(url, frozenset({"a"}))
    sampler.read()
    assert set(sampler.samples) == {"a"}, "only the devices it was given"
    sampler.add(frozenset({"b"}))
    sampler.read()
    assert set(sampler.samples) == {"a", "b"} and sampler.latest("b") is not None
