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


def test_bookmarks_and_lists_say_how_far_the_stream_has_delivered(monkeypatch: Any) -> None:
    """A bookmark (the server's word that nothing up to its revision is left) and a list's revision reach
    on_progress; events reach on_event only (the watch is faked: canned events, no apiserver)."""
    from conformance.observe import watchcache

    progress: list[int] = []
    events: list[str] = []
    cache = WatchCache(
        client.ApiClient(),
        "things",
        "example.com",
        "v1",
        on_event=lambda k, o: events.append(k),
        on_progress=progress.append,
    )
    cache._func = _lister(["a"])
    cache._relist()
    canned = [
        {"type": "MODIFIED", "raw_object": {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "11"}}},
        {"type": "BOOKMARK", "raw_object": {"metadata": {"resourceVersion": "14"}}},
    ]
    monkeypatch.setattr(watchcache.RawWatch, "stream", lambda self, *a, **kw: iter(canned))
    assert cache._watch("9") == "14"
    assert progress == [9, 14] and events == ["SYNC", "MODIFIED"]
