"""One log line per state change of a claim's device or of a physical device, none while nothing changes."""

from __future__ import annotations

import logging

log = logging.getLogger("reference-controller")


class StateLog:
    def __init__(self) -> None:
        self._states: dict[str, str] = {}

    def update(self, states: dict[str, str]) -> None:
        for key, state in sorted(states.items()):
            if self._states.get(key) != state:
                log.info("%s: %s -> %s", key, self._states.get(key, "new"), state)
        for key in sorted(set(self._states) - set(states)):
            if key.startswith("claim "):  # a claim's device that is no longer allocated
                log.info("%s: %s -> released", key, self._states[key])
        self._states = dict(states)

    def event(self, key: str, what: str) -> None:
        """An outcome that is not a level (an attach that took 1.2 s, a write that was refused)."""
        log.info("%s: %s", key, what)
