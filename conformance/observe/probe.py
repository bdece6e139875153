"""The fabric probe, sampled for the whole run: what the fabric said at any moment a check compares against.

One sampler per run (not one per scenario: every scenario's question is "what did the fabric say just after this
moment?"). Each sample is stamped with the time its request was SENT, so the sample a check reads for a moment t
(the first one sent at or after t) describes the fabric at t or later: "the probe said not attached after the
condition was seen True" then proves the condition came before the attach. Only changes are stored.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from conformance.observe.slices import probe_body

PERIOD_S = 0.2
States = dict[str, tuple[str, str]]  # physical identity -> (node, state) of every device that is not free


@dataclass
class ProbeRecorder:
    url: str
    period: float = PERIOD_S
    errors: list[str] = field(default_factory=list)
    _times: list[float] = field(default_factory=list)  # send time of every sample
    _changes: list[tuple[float, States, list[dict[str, Any]]]] = field(default_factory=list)  # (time, states, free)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> ProbeRecorder:
        self._sample()  # the first reading before anyone asks
        threading.Thread(target=self._loop, daemon=True, name="probe").start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def _sample(self) -> None:
        sent = time.time()
        try:
            body = probe_body(self.url)
        except OSError as exc:  # the fabric manager restarting, a slow answer: a gap, not a reading
            self.errors.append(f"{time.strftime('%H:%M:%S')} {exc!r}")
            return
        states = {a["device"]: (a["node"], a.get("state", "attached")) for a in body.get("attachments", [])}
        free = list(body.get("free") or [])
        with self._cond:
            self._times.append(sent)
            if not self._changes or self._changes[-1][1] != states or self._changes[-1][2] != free:
                self._changes.append((sent, states, free))
            self._cond.notify_all()

    def _reading(self, at: float) -> tuple[States, list[dict[str, Any]]] | None:
        with self._cond:
            i = bisect.bisect_left(self._times, at)
            if i == len(self._times):
                return None
            sent = self._times[i]
            j = bisect.bisect_right([c[0] for c in self._changes], sent) - 1
            return self._changes[j][1], self._changes[j][2]

    def after(self, at: float, timeout: float = 10.0) -> States:
        """The probe's answer to the first request sent at or after `at` (waits for it)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (reading := self._reading(at)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no fabric probe answer after {at:.3f} in {timeout:g}s: {self.errors[-3:]}")
                self._cond.wait(min(left, self.period))
        return reading[0]

    def free_after(self, at: float, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The probe's free counts (`free: [{fabric, model, free, total, nodes}]`) in the first answer sent at or
        after `at`; empty when the probe does not report them."""
        self.after(at, timeout)
        reading = self._reading(at)
        return reading[1] if reading else []

    def now(self) -> States:
        return self.after(time.time())

    def latest(self) -> tuple[float, States, list[dict[str, Any]]] | None:
        """The newest answer: (send time of the sample that first showed it, attachments, free counts)."""
        with self._cond:
            return self._changes[-1] if self._changes else None
