"""Client of an implementation's fault injector (the profile's faultInjector.url).

Protocol (the reference fabric manager's /v1/faults):
- POST {url} {"mode": "fail"|"hang"|"slow", "operation": "attach"|"detach", "device": <physical identity>,
  "count": N, "reason"/"message" (fail), "delaySeconds" (slow)} -> 201 {"id": ...}
- DELETE {url}/{id} removes one fault; POST {url}/release {"device": ..., "outcome": "complete"|"fail"} ends a
  hung operation.
A session removes the faults it made when it ends, and only those: scenarios run side by side.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

TIMEOUT_S = 10.0


class FaultInjectorError(RuntimeError):
    """The fault injector refused or could not be reached; the message has its answer."""


@dataclass
class FaultInjector:
    url: str
    made: list[str] = field(default_factory=list)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url.rstrip("/") + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            answer = exc.read().decode(errors="replace")
            raise FaultInjectorError(f"{method} {request.full_url}: {exc.code} {answer}") from None
        except OSError as exc:
            raise FaultInjectorError(f"{method} {request.full_url}: {exc}") from None
        return json.loads(text) if text else None

    def inject(self, **fault: Any) -> str:
        made = self._call("POST", "", fault)
        self.made.append(made["id"])
        return made["id"]

    def slow_attach(self, device: str, seconds: float) -> str:
        return self.inject(mode="slow", operation="attach", device=device, delaySeconds=seconds)

    def fail_attach(self, device: str, reason: str = "InjectedFailure", message: str = "injected by the suite") -> str:
        return self.inject(mode="fail", operation="attach", device=device, reason=reason, message=message)

    def hang_attach(self, device: str) -> str:
        return self.inject(mode="hang", operation="attach", device=device)

    def release(self, device: str, outcome: str = "complete") -> Any:
        return self._call("POST", "/release", {"device": device, "outcome": outcome})

    def clear(self) -> list[str]:
        """Remove the faults this client made; a fault already used up (404) is fine."""
        problems = []
        while self.made:
            fault = self.made.pop()
            try:
                self._call("DELETE", f"/{fault}")
            except FaultInjectorError as exc:
                if ": 404 " not in str(exc):
                    problems.append(str(exc))
        return problems

    @contextmanager
    def session(self) -> Iterator[FaultInjector]:
        try:
            yield self
        finally:
            problems = self.clear()
            if problems:
                raise FaultInjectorError(f"could not remove injected faults: {problems}")
