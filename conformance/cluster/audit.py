"""The API server's refusals of service accounts, read from its audit log (on the clusters the suite brings up).

A stack that lacks a right does not say so in any object: its writes are refused and it retries. The audit log is
the API server's own word for that. The policy (POLICY) logs every request of a service account at level Metadata
(who, verb, resource, subresource, namespace, name, the response's code and message; never a body), at
ResponseComplete only; requests of every other user are not logged. A dry run's refusal is not kept: it changes
nothing, so no stack's work waits on it, and the suite's own probes with a stack's token (IMP-9, RDY-8: writes
refused on purpose) are dry runs; blamed, they led the first line of another scenario's failure on a node-local run.
A refusal is an answer 401, 403 or 422: 403 for
RBAC, 422 for what a strategy refuses, among them a status.devices write without `resourceclaims/driver`
(`arbitrary-node:<verb>` for a central writer, `associated-node:<verb>` for a token bound to a pod on the claim's node),
which RBAC checks inside the resourceclaims/status request; its audit event names resourceclaims/status, so the
synthetic subresource and its scope are read from the message.

AuditLog reads the file incrementally and keeps only refusals, so a long run's log is parsed once.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SA_PREFIX = "system:serviceaccount:"
REFUSED = (401, 403, 422)
# Every request of a service account, at Metadata, once (ResponseComplete); nothing else.
POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts"]}, {"level": "None"}],
}
NOT_AVAILABLE = "the API server's refusals are not known: no audit log the suite can read on this cluster"
# `changing status.devices requires resource="resourceclaims/driver", verb="[arbitrary-node:update]"` (the strategy's
# words) or `cannot arbitrary-node:update resource "resourceclaims/driver"` (the authorizer's).
_DRIVER_SCOPE = re.compile(r"(arbitrary-node|associated-node):(update|patch)")
_MAX_KEPT = 100_000  # refusals kept (a stack refusing in a tight loop for hours would otherwise grow without bound)


@dataclass(frozen=True)
class Refusal:
    at: float  # the request's stageTimestamp (seconds since the epoch)
    account: str  # NAMESPACE/NAME of the service account
    verb: str  # the request's verb (update, patch, create, ...)
    resource: str  # resource[/subresource] as authorized: resourceclaims/driver for a status.devices refusal
    scope: str  # arbitrary-node or associated-node for resourceclaims/driver, else ""
    namespace: str
    name: str
    code: int
    message: str
    node: str = ""  # the node a pod-bound token names (authentication.kubernetes.io/node-name), if any

    @property
    def what(self) -> str:
        """`update resourceclaims/driver arbitrary-node`: what was refused, as the RBAC rule it lacks reads."""
        return " ".join(p for p in (self.verb, self.resource, self.scope) if p)


def parse(line: str) -> Refusal | None:
    """The refusal an audit event (one JSON line) records, or None (not a refusal, not a service account's)."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    status = event.get("responseStatus") or {}
    user = (event.get("user") or {}).get("username") or ""
    if status.get("code") not in REFUSED or not user.startswith(SA_PREFIX):
        return None
    if "dryRun=" in str(event.get("requestURI") or ""):
        return None  # a dry run changes nothing, so no stack's work waits on it: the suite's own probes (IMP-9, RDY-8)
    ref = event.get("objectRef") or {}
    message = str(status.get("message") or "")
    resource = ref.get("resource") or event.get("requestURI", "?")
    scope = ""
    if resource == "resourceclaims" and (found := _DRIVER_SCOPE.search(message)) and "resourceclaims/driver" in message:
        resource, scope = "resourceclaims/driver", found.group(1)
    elif ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    node = ((event.get("user") or {}).get("extra") or {}).get("authentication.kubernetes.io/node-name") or [""]
    return Refusal(
        at=_seconds(event.get("stageTimestamp") or event.get("requestReceivedTimestamp") or ""),
        account=user.removeprefix(SA_PREFIX).replace(":", "/", 1),
        verb=str(event.get("verb") or ""),
        resource=resource,
        scope=scope,
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        code=int(status["code"]),
        message=message,
        node=str(node[0]),
    )


def _seconds(stamp: str) -> float:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class AuditLog:
    """The refusals an audit log file holds so far, read incrementally (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self._refusals: list[Refusal] = []
        self._lock = threading.Lock()

    def refusals(
        self,
        since: float,
        until: float | None = None,
        *,
        namespaces: Iterable[str] | None = None,
        accounts: Iterable[str] | None = None,
    ) -> list[Refusal]:
        """Refusals between `since` and `until`; of objects in `namespaces` (cluster-scoped ones, e.g. slices, count
        for every window) and, if given, of `accounts` only (NAMESPACE/NAME)."""
        self._read()
        spaces = set(namespaces) if namespaces is not None else None
        users = set(accounts) if accounts is not None else None
        with self._lock:
            return [
                r
                for r in self._refusals
                if r.at >= since
                and (until is None or r.at <= until)
                and (spaces is None or not r.namespace or r.namespace in spaces)
                and (users is None or r.account in users)
            ]

    def _read(self) -> None:
        with self._lock:
            try:
                with self.path.open("rb") as f:
                    f.seek(self._offset)
                    data = f.read()
            except OSError:
                return
            self._offset += len(data)
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()  # a line still being written
            for raw in lines:
                if b'"responseStatus"' in raw and (found := parse(raw.decode(errors="replace"))):
                    self._refusals.append(found)
            del self._refusals[: max(0, len(self._refusals) - _MAX_KEPT)]


_LOGS: dict[Path, AuditLog] = {}
_LOGS_LOCK = threading.Lock()


def audit_log(path: Path | str | None) -> AuditLog | None:
    """The one reader of the audit log at `path` in this process (None: the cluster has none the suite can read)."""
    if path is None:
        return None
    key = Path(path)
    with _LOGS_LOCK:
        return _LOGS.setdefault(key, AuditLog(key))


def summarize(refusals: list[Refusal], limit: int = 3, *, short: bool = False) -> list[str]:
    """One line per account and kind of refusal, most frequent first: `update resourceclaims/driver arbitrary-node
    refused 37 times for NS/NAME (422, 00:41:02-00:41:40 UTC): <its first message>` (`short`: without the time span
    and message)."""
    groups: dict[tuple[str, str, int], list[Refusal]] = {}
    for r in refusals:
        groups.setdefault((r.account, r.what, r.code), []).append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    lines = []
    for (account, what, code), found in ordered[:limit]:
        times = "once" if len(found) == 1 else f"{len(found)} times"
        line = f"{what} refused {times} for {account} ({code}"
        if short:
            lines.append(line + ")")
            continue
        span = _clock(found[0].at) + (f"-{_clock(found[-1].at)}" if len(found) > 1 else "")
        lines.append(f"{line}, {span} UTC): {found[0].message[:300]}")
    if len(ordered) > limit:
        lines.append(f"and {len(ordered) - limit} more kinds of refusal")
    return lines


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%H:%M:%S") if at else "?"
