"""WatchCache's relist (the list is faked: a function returning a canned body; no apiserver)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from kubernetes import client

from conformance.observe.watchcache import WatchCache


def _lister(*bodies: list[str]) -> Any:
    """A list function answering each call with the next list of object names."""
    calls = iter(bodies)

    def list_(*_args: Any, **_kwargs: Any) -> SimpleNamespace:
        names = next(calls)
        items = [{"metadata": {"name": n, "namespace": "ns", "resourceVersion": "5"}} for n in names]
        return SimpleNamespace(data=json.dumps({"metadata": {"resourceVersion": "9"}, "items": items}))

    return list_


def test_an_object_gone_between_two_lists_gets_its_deleted_event() -> None:
    seen: list[tuple[str, str]] = []
    cache = WatchCache(
        client.ApiClient(), "things", "example.com", "v1", on_event=lambda k, o: seen.append((k, o["metadata"]["name"]))
    )
    cache._func = _lister(["a", "b"], ["a"])
    assert cache._relist() == "9"
    seen.clear()
    cache._relist()
    assert seen == [("DELETED", "b"), ("SYNC", "a")]
    assert [o["metadata"]["name"] for o in cache.items()] == ["a"]


def test_watch_events_are_not_turned_into_the_clients_models() -> None:
    from conformance.observe.watchcache import RawWatch

    line = json.dumps(
        {"type": "MODIFIED", "object": {"kind": "Node", "metadata": {"name": "n", "resourceVersion": "7"}}}
    )
    event = RawWatch().unmarshal_event(line, RawWatch().get_return_type(client.CoreV1Api().list_node))
    assert event["type"] == "MODIFIED" and event["raw_object"]["metadata"]["name"] == "n"
    assert isinstance(event["object"], dict)  # no V1Node made
