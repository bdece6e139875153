"""The readiness sampler (observe/readiness.py) samples a device leased after it started once told to
(small-pool-churn's device leased on purpose: its readiness was never sampled, and RDY-3/IMP-28 failed "the probe gave
no answer").
A local HTTP server plays the probe; no cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from json_server import serving

from conformance.observe.readiness import ReadinessSampler

ANSWER = {
    "devices": [
        {"device": "a", "node": "node-0", "ready": True, "since": "2026-12-07T00:00:00Z"},
        {"device": "b", "node": "node-0", "ready": True, "since": "2026-12-07T00:00:00Z"},
    ]
}


@pytest.fixture
def url() -> Iterator[str]:
    with serving(lambda _request: ANSWER) as port:
        yield f"http://127.0.0.1:{port}/v1/readiness"


def test_a_device_added_later_is_sampled_from_then_on(url: str) -> None:
    sampler = ReadinessSampler(url, frozenset({"a"}))
    sampler.read()
    assert set(sampler.samples) == {"a"}, "only the devices it was given"
    sampler.add(frozenset({"b"}))
    sampler.read()
    assert set(sampler.samples) == {"a", "b"} and sampler.latest("b") is not None
