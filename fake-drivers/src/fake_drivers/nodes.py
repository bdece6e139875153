"""The cluster's node names, for drivers that must tell a node that exists from one that was deleted.

Listing nodes is a permission a deployment may withhold: then (403) the lister says None once and for all, and the
caller treats every node as existing, saying what that costs in its own words.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


class NodeLister:
    """Node names read through `list_names`, at most every `max_age_s`; None where listing is refused."""

    def __init__(self, list_names: Callable[[], frozenset[str]], when_refused: str, max_age_s: float = 0.0) -> None:
        self._list = list_names
        self._when_refused = when_refused  # the log line's consequence: "serving every configured node"
        self._max_age_s = max_age_s
        self._read: tuple[float, frozenset[str] | None] | None = None  # (read at, names)
        self.refused = False

    def __call__(self) -> frozenset[str] | None:
        if self.refused:
            return None
        if self._read is not None and time.monotonic() - self._read[0] < self._max_age_s:
            return self._read[1]
        try:
            names: frozenset[str] | None = self._list()
        except ApiException as exc:
            if exc.status != 403:
                raise
            log.warning("may not list nodes (%s): %s", exc.reason, self._when_refused)
            self.refused, names = True, None
        self._read = (time.monotonic(), names)
        return names
