"""Client of an implementation's fault injector: make the next attach (or detach) of a device fail, hang or slow.

The contract every implementation's `faultInjector` must follow is the fault API of the reference fabric manager
(fake-drivers/src/fake_drivers/fabric/service.py). The profile's `faultInjector.url` is the base below; bodies are
JSON with camelCase keys, errors answer non-2xx with `{"error": ..., "message": ...}`.

- `POST {url}` `{mode, operation, device, count, reason, message, delaySeconds}` -> 201 and the armed fault
  `{id, operation, mode, device, remaining, used, ...}`. `mode`: `fail` (the operation runs, then fails with
  `reason` / `message`, which a controller may copy into a claim condition: condition-reason syntax), `hang`
  (the operation waits until released), `slow` (takes `delaySeconds` longer, then completes). `operation`:
  `attach` (default) or `detach`. `device`: the physical identity of the device (the profile's
  identityAttribute value; the fabric uuid in the reference). `count`: how many matching operations the fault
  applies to; a fault is gone once used up.
- Selectors, for count-based fabric pools where the suite cannot know the physical device in advance: instead of
  (or besides) `device`, `node` (attaches to that node), `model`, `fabric`; the fault applies to an operation
  that matches every selector given. The armed fault echoes them.
- `GET {url}/{id}` -> the fault, armed or not any more (used up or disarmed), with `hits: [{operationId, device,
  name, fabric, model, node, at}]`: the operations it applied to, so the suite learns which physical device a
  selector-armed fault hit. 404 when the injector does not know the id.
- `GET {url}` -> `{faults: [...], hung: [{id, operation, device, node, startedAt, fault}]}`.
- `DELETE {url}/{id}` -> 200 and the disarmed fault; 404 when it is not armed (any more: used up).
- `POST {url}/release` `{device, fault, outcome: complete|fail, reason, message}` -> `{released: [hung
  operations]}`: hung operations (of that device, and/or that the fault with id `fault` made hang) go on and
  complete or fail.
- `DELETE {url}` disarms every fault. The suite never calls it: scenarios run side by side, and each one touches
  only the faults it armed (deleted by id) and the devices it leased.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from conformance.cluster.waits import wait_for
from conformance.implementation import endpoints

Mode = Literal["fail", "hang", "slow", "unreachable"]
Operation = Literal["attach", "detach"]
REQUEST_TIMEOUT_S = 10.0


class FaultInjectorError(RuntimeError):
    """The fault injector refused a request or did not answer; the message has its reply."""


@dataclass
class FaultInjector:
    """Faults of one scenario, on its leased devices or nodes only; `close` disarms them and lets its hung
    operations go."""

    url: str  # the profile's faultInjector.url, placeholders resolved
    devices: frozenset[str]  # physical identities leased by the scenario
    # Nodes the scenario has to itself: a fault may select attaches to one of them when the physical device is
    # not known in advance (count-based pools), without touching another scenario's attaches.
    nodes: frozenset[str] = frozenset()
    armed: dict[str, dict[str, Any]] = field(default_factory=dict)  # fault id -> fault as armed
    selected: set[str] = field(default_factory=set)  # ids of faults armed by selectors, armed or not any more

    def arm(
        self,
        mode: Mode,
        device: str | None = None,
        operation: Operation = "attach",
        count: int = 1,
        *,
        node: str | None = None,
        model: str | None = None,
        fabric: str | None = None,
        **extra: Any,
    ) -> str:
        """Arm a fault on a leased device, or on the attaches to a node of the scenario (narrowed by model or
        fabric if given); returns its id. `extra`: reason, message, delaySeconds."""
        if device is not None and device not in self.devices:
            raise ValueError(f"device {device!r} is not leased by this scenario (leased: {sorted(self.devices)})")
        if device is None and node not in self.nodes:
            raise ValueError(f"a fault without a leased device needs a node of the scenario {sorted(self.nodes)}")
        selectors = {"node": node, "model": model, "fabric": fabric}
        body = {"mode": mode, "operation": operation, "device": device, "count": count, **extra}
        body |= {key: value for key, value in selectors.items() if value is not None}
        fault = self._call("POST", self.url, body)
        self.armed[fault["id"]] = fault
        if device is None:
            self.selected.add(str(fault["id"]))
        return str(fault["id"])

    def arm_all(self, mode: Mode, count: int, *, model: str | None = None, operation: Operation = "attach") -> str:
        """Arm a fault on the next `count` operations of any device (of `model`): only for a caller that has the
        implementation to itself (`make scale` holds every attach of its stress at once); returns its id."""
        body = {"mode": mode, "operation": operation, "count": count} | ({"model": model} if model else {})
        fault = self._call("POST", self.url, body)
        self.armed[fault["id"]] = fault
        self.selected.add(str(fault["id"]))
        return str(fault["id"])

    def fault(self, fault_id: str) -> dict[str, Any]:
        """One of this scenario's faults as the injector knows it now, with `hits` (the operations it hit)."""
        return dict(self._call("GET", f"{self.url}/{fault_id}"))

    def hits(self, fault_id: str) -> list[dict[str, Any]]:
        """The operations a fault applied to, oldest first: `device` is the physical device it hit."""
        return list(self.fault(fault_id).get("hits") or [])

    def first_hit(self, armed: dict[str, str], *, timeout: float, expected: str, interval: float) -> str:
        """The device (key of `armed`: device -> fault id) whose fault hit an operation first, waited for up to
        `timeout` (polled every `interval`, slowing to 4x)."""
        return wait_for(
            lambda: next((d for d, f in armed.items() if self.hits(f)), None),
            bool,
            timeout=timeout,
            expected=expected,
            interval=interval,
            max_interval=4 * interval,
        )

    def release_fault(
        self, fault_id: str, outcome: Literal["complete", "fail"] = "complete", **extra: str
    ) -> list[dict[str, Any]]:
        """Let the operations one of this scenario's faults made hang go on; returns them. `extra`: reason, message
        (outcome fail)."""
        body = {"fault": fault_id, "outcome": outcome, **extra}
        return list(self._call("POST", f"{self.url}/release", body)["released"])

    def disarm(self, fault_id: str) -> dict[str, Any] | None:
        """Disarm one of this scenario's faults; the fault as it was, or None if it was used up already."""
        self.armed.pop(fault_id, None)
        try:
            return self._call("DELETE", f"{self.url}/{fault_id}")
        except FaultInjectorError as exc:
            if exc.args[1:] == (404,):
                return None
            raise

    def release(self, device: str, outcome: Literal["complete", "fail"] = "complete") -> list[dict[str, Any]]:
        """Let the hung operations of a leased device go on; returns them (empty: nothing was hung)."""
        if device not in self.devices:
            raise ValueError(f"device {device!r} is not leased by this scenario")
        return list(self._call("POST", f"{self.url}/release", {"device": device, "outcome": outcome})["released"])

    def hung(self) -> list[dict[str, Any]]:
        """Operations hung on this scenario's devices or by its selector faults."""
        return [
            op
            for op in self._call("GET", self.url)["hung"]
            if op["device"] in self.devices or op.get("fault") in self.selected
        ]

    def close(self) -> None:
        for fault_id in list(self.armed):
            self.disarm(fault_id)
        hung = self.hung()
        # A hung attach left behind would block the device for the next scenario.
        for fault_id in sorted({op["fault"] for op in hung if op.get("fault") in self.selected}):
            self.release_fault(fault_id)
        for device in sorted({op["device"] for op in hung if op["device"] in self.devices}):
            self.release(device)

    def __enter__(self) -> FaultInjector:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @staticmethod
    def _call(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with endpoints.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            reply = exc.read().decode(errors="replace")[:1000]
            raise FaultInjectorError(f"{method} {url} {json.dumps(body)}: {exc.code} {reply}", exc.code) from None
        except OSError as exc:
            raise FaultInjectorError(f"{method} {url}: no answer: {exc}") from None
