"""The readiness probe of a node-local readiness gate (profile `readinessProbe`, bindingModel node-local), sampled
while a scenario runs: per device, ready or not, on which node, since when (docs/fabric-protocols.openapi.json,
`GET /v1/readiness`).

`GET {url}` -> `{"devices": [{"device": IDENTITY, "node": NODE|null, "ready": bool, "since": RFC3339, ...}]}`;
`device` is the value of the profile's identityAttribute. A condition or a binding is judged against the first
answer taken after it: the device must be ready on the node then, and have been since no later than the moment
judged (+ SLACK_S for the two clocks).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType

from conformance.implementation import endpoints

SAMPLE_S = 0.2
SLACK_S = 0.5  # the probe's clock against the suite's (one machine here; a remote probe needs synchronized clocks)
ANSWER_WAIT_S = 10.0  # how long a judgement waits for a probe answer taken after the moment it judges


@dataclass(frozen=True)
class Sample:
    at: float  # time.time() when the answer came
    ready: bool
    node: str | None
    since: float
    state: str


@dataclass
class ReadinessSampler:
    """Samples the probe in a thread for the devices given, until closed."""

    url: str
    devices: frozenset[str]
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> ReadinessSampler:
        self.read()  # a probe that does not answer at all fails the scenario at once
        if self.errors:
            raise AssertionError(f"the readiness probe {self.url} does not answer: {self.errors[-1]}")
        self._thread = threading.Thread(target=self._run, name="readiness-probe", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.read()

    def add(self, devices: frozenset[str]) -> None:
        """Sample these devices too from now on (a device leased after the sampler started)."""
        with self._lock:
            self.devices = self.devices | devices

    def read(self) -> None:
        try:
            with endpoints.urlopen(self.url, timeout=5.0) as response:
                answer = json.load(response)
        except (OSError, ValueError) as exc:
            with self._lock:
                self.errors.append(f"{time.time():.3f}: {exc}")
            return
        at = time.time()
        with self._lock:
            for entry in answer.get("devices") or []:  # self.devices read under the lock: add() may grow it
                device = str(entry.get("device"))
                if device not in self.devices:
                    continue
                since = _epoch(entry.get("since"))
                state = str(entry.get("state") or ("ready" if entry.get("ready") else "not ready"))
                sample = Sample(at, bool(entry.get("ready")), entry.get("node"), since, state)
                self.samples.setdefault(device, []).append(sample)

    def after(self, device: str, moment: float) -> Sample | None:
        """The first answer about `device` taken after `moment`, waited for up to ANSWER_WAIT_S."""
        deadline = time.time() + ANSWER_WAIT_S
        while True:
            with self._lock:
                found = next((s for s in self.samples.get(device, []) if s.at >= moment), None)
            if found is not None or time.time() > deadline or self._stop.is_set():
                return found
            time.sleep(SAMPLE_S)

    def ready_problem(self, device: str, node: str | None, moment: float, what: str) -> str | None:
        """Why `device` was not ready on `node` at `moment` (when `what` happened) by the probe, or None."""
        sample = self.after(device, moment)
        if sample is None:
            return f"{what} at {_clock(moment)}: the probe gave no answer about device {device} afterwards"
        if not sample.ready:
            return (
                f"{what} at {_clock(moment)}, but the probe said device {device} was {sample.state} (node "
                f"{sample.node}, since {_clock(sample.since)}) at {_clock(sample.at)}"
            )
        if node is not None and sample.node != node:
            where = f"{what} at {_clock(moment)} for node {node}"
            return f"{where}, but the probe said device {device} is ready on {sample.node}"
        if sample.since > moment + SLACK_S:
            return (
                f"{what} at {_clock(moment)}, but the probe says device {device} is ready on {sample.node} only since "
                f"{_clock(sample.since)} ({sample.since - moment:.2f}s later)"
            )
        return None

    def latest(self, device: str) -> Sample | None:
        """The newest answer about `device`, None before the first."""
        with self._lock:
            found = self.samples.get(device)
            return found[-1] if found else None

    def ready_since(self, device: str) -> float | None:
        """When the device was first seen ready (its reported since), None if never."""
        with self._lock:
            return next((s.since for s in self.samples.get(device, []) if s.ready), None)


def _epoch(stamp: object) -> float:
    if not isinstance(stamp, str) or not stamp:
        return 0.0
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 1000) % 1000:03d}"
