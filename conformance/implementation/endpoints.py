"""HTTP(S) requests to the implementation's endpoints (fabric probe, fault injector), with their CA and token.

The harness registers each endpoint of the profile once its URL is resolved; every request the suite makes to a
URL under a registered one goes through `urlopen` here and gets that endpoint's CA and bearer token. Callers keep
passing plain URLs (the probe and fault-injector protocols are URL-based), so no caller carries credentials.
"""

from __future__ import annotations

import ssl
import threading
import urllib.request
from dataclasses import dataclass
from http.client import HTTPResponse


@dataclass(frozen=True)
class Access:
    base: str
    context: ssl.SSLContext | None
    token: str | None


_lock = threading.Lock()
_registered: dict[str, Access] = {}


def register(base: str, ca_file: str | None = None, token: str | None = None) -> None:
    """Requests to `base` and below use this CA (HTTPS; the system's CAs when None) and bearer token."""
    if ca_file and not base.startswith("https://"):
        raise ValueError(f"caFile is given for {base}, which is not an https:// URL")
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    with _lock:
        _registered[base.rstrip("/")] = Access(base.rstrip("/"), context, token)


def unregister(base: str) -> None:
    with _lock:
        _registered.pop(base.rstrip("/"), None)


def access(url: str) -> Access | None:
    """The registered endpoint `url` belongs to (the longest base that prefixes it), if any."""
    with _lock:
        found = [a for b, a in _registered.items() if url == b or url.startswith(b + "/") or url.startswith(b + "?")]
    return max(found, key=lambda a: len(a.base), default=None)


def urlopen(request: str | urllib.request.Request, timeout: float) -> HTTPResponse:
    """urllib.request.urlopen with the registered endpoint's CA and token."""
    if isinstance(request, str):
        request = urllib.request.Request(request)
    found = access(request.full_url)
    if found and found.token:
        request.add_header("Authorization", f"Bearer {found.token}")
    response: HTTPResponse = urllib.request.urlopen(request, timeout=timeout, context=found.context if found else None)
    return response
