"""List+watch caches of the objects the decisions read. Any change wakes the reconciler; the watch ends every
`resync_s` and the cache is listed again, so a missed event costs at most one resync."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ..dra import RESOURCE_GROUP, RESOURCE_VERSION

log = logging.getLogger(__name__)


class Cache(threading.Thread):
    def __init__(
        self,
        api: client.ApiClient,
        plural: str,
        on_change: Callable[[], None],
        stop: threading.Event,
        *,
        resync_s: float = 30.0,
        label_selector: str = "",
        field_selector: str = "",
        version: str = RESOURCE_VERSION,
    ) -> None:
        super().__init__(name=f"watch-{plural}", daemon=True)
        self._api = client.CustomObjectsApi(api)
        self._plural = plural
        self._version = version
        self._on_change = on_change
        self._stop = stop
        self._resync_s = resync_s
        self._selectors = {"label_selector": label_selector, "field_selector": field_selector}
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    def run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._list_and_watch()
                failures = 0
            except (ApiException, HTTPError, OSError) as exc:
                failures += 1
                log.warning("watch %s: %s; listing again", self._plural, getattr(exc, "reason", exc))
                self._stop.wait(min(5.0, 0.2 * 2**failures))

    def _list_and_watch(self) -> None:
        listed = self._api.list_cluster_custom_object(RESOURCE_GROUP, self._version, self._plural, **self._selectors)
        with self._lock:
            self._items = {self._key(o): o for o in listed["items"]}
        self.synced.set()
        self._on_change()
        version = listed["metadata"]["resourceVersion"]
        stream = watch.Watch()
        for event in stream.stream(
            self._api.list_cluster_custom_object,
            RESOURCE_GROUP,
            self._version,
            self._plural,
            resource_version=version,
            timeout_seconds=max(1, int(self._resync_s)),
            allow_watch_bookmarks=True,
            **self._selectors,
        ):
            if self._stop.is_set():
                stream.stop()
                return
            kind, obj = event["type"], event["object"]
            if kind == "ERROR":
                # 410 Gone (the version is too old) and friends: list again.
                log.info("watch %s: %s", self._plural, obj.get("message", obj))
                return
            if kind == "BOOKMARK":
                continue
            with self._lock:
                if kind == "DELETED":
                    self._items.pop(self._key(obj), None)
                else:
                    self._items[self._key(obj)] = obj
            self._on_change()
