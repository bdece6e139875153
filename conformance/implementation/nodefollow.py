"""The cluster's nodes as the harness follows them: for node hooks and perNode processes, run for every node that is
there at the start and for every node that joins during the run (IMP-16 adds one), stopped when a node goes.

One list, then one watch from the list's resourceVersion (no node is missed between them); a watch that expired
(410) lists again and reports the difference. Callbacks run on the follower's thread, one at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

WATCH_SECONDS = 2  # how long one watch request lasts: bounds how long stop() waits for the thread
RETRY_S = 1.0


class NodeSource(Protocol):
    """Where the node names come from (a cluster; a unit test's stand-in)."""

    def list(self) -> tuple[set[str], str]:
        """The nodes now and the resourceVersion of that list."""
        ...

    def events(self, since: str) -> list[tuple[str, str, str]]:
        """(type ADDED|DELETED|MODIFIED|BOOKMARK, node name, resourceVersion) after `since`, for up to
        WATCH_SECONDS; raises Expired when `since` is too old."""
        ...


class Expired(Exception):
    """The watch's resourceVersion is gone (410): list again."""


@dataclass
class KubeNodes:
    core: client.CoreV1Api

    def list(self) -> tuple[set[str], str]:
        nodes = self.core.list_node()
        return {n.metadata.name for n in nodes.items}, nodes.metadata.resource_version

    def events(self, since: str) -> list[tuple[str, str, str]]:
        found = []
        try:
            for event in watch.Watch().stream(
                self.core.list_node, resource_version=since, timeout_seconds=WATCH_SECONDS
            ):
                meta = event["object"].metadata
                found.append((event["type"], meta.name or "", meta.resource_version or since))
        except ApiException as exc:
            if exc.status == 410:
                raise Expired from None
            raise
        return found


@dataclass
class NodeFollower:
    """Calls `joined(node)` for every node that appears after the initial list and `gone(node)` for every node that
    disappears; `known` is the set the initial list gave (the caller handled those)."""

    source: NodeSource
    known: set[str]
    since: str
    joined: Callable[[str], None]
    gone: Callable[[str], None]
    problem: Callable[[str], None]
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> NodeFollower:
        self._thread = threading.Thread(target=self._run, name="node-follower", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WATCH_SECONDS * 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                events = self.source.events(self.since)
            except Expired:
                self._relist()
                continue
            except (ApiException, HTTPError, OSError) as exc:
                self.problem(f"watching nodes: {exc}; again in {RETRY_S:g}s")
                self._stop.wait(RETRY_S)
                continue
            for kind, name, version in events:
                if self._stop.is_set():
                    return
                self.since = version
                if kind == "ADDED" and name and name not in self.known:
                    self.known.add(name)
                    self.joined(name)
                elif kind == "DELETED" and name in self.known:
                    self.known.discard(name)
                    self.gone(name)

    def _relist(self) -> None:
        try:
            names, self.since = self.source.list()
        except (ApiException, HTTPError, OSError) as exc:
            self.problem(f"listing nodes: {exc}; again in {RETRY_S:g}s")
            self._stop.wait(RETRY_S)
            return
        for name in sorted(names - self.known):
            self.known.add(name)
            self.joined(name)
        for name in sorted(self.known - names):
            self.known.discard(name)
            self.gone(name)
