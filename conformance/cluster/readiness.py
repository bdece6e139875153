"""Readiness of a starting control plane: followed by watch where the API offers one, probed where it does not,
and several waits side by side so a bring-up takes as long as its slowest part, not the sum of them."""

from __future__ import annotations

import base64
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import yaml
from kubernetes import watch

from conformance.cluster.waits import TRANSIENT, Cancelled, WaitTimeout, check_cancelled

# Component health endpoints serve self-signed certificates; they answer /healthz and /readyz to anyone
# (--authorization-always-allow-paths), and nothing secret is read.
_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE
WATCH_CHUNK_S = 1  # a watch is reopened this often, so a stop request is seen within a second


def warm_client_imports() -> threading.Thread:
    """Import, in the background, the parts of the Kubernetes client a bring-up needs (CoreV1Api and its models).

    The client builds its pydantic models on first use: seconds of CPU (2 s idle, 10 s on a busy 2-core machine)
    that would otherwise start only once the apiserver is ready. A thread that needs them first waits for this
    import (Python's import lock), never imports twice.
    """

    def load() -> None:
        from kubernetes import client

        _ = client.CoreV1Api, client.V1NodeList, client.V1ConfigMap

    thread = threading.Thread(target=load, name="warm-kubernetes-client", daemon=True)
    thread.start()
    return thread


def inline_kubeconfig(path: Path) -> str:
    """The kubeconfig at `path` with its certificate files embedded (a file that works on its own, like
    `kwokctl get kubeconfig` writes, without running it)."""
    doc = yaml.safe_load(path.read_text())
    fields = {
        "certificate-authority": "certificate-authority-data",
        "client-certificate": "client-certificate-data",
        "client-key": "client-key-data",
    }
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in doc.get(section) or []:
            body = entry.get(key) or {}
            for ref, data in fields.items():
                if ref in body:
                    body[data] = base64.b64encode(Path(body.pop(ref)).read_bytes()).decode()
    return yaml.safe_dump(doc)


def https_get(url: str, timeout: float = 2.0) -> str:
    """Body of a 2xx answer of a component's own HTTPS endpoint; an error or another status raises OSError."""
    with urllib.request.urlopen(url, timeout=timeout, context=_INSECURE) as response:
        return response.read().decode(errors="replace")


def watch_until(
    list_call: Callable[..., Any],
    done: Callable[[dict[str, Any]], bool],
    *,
    timeout: float,
    expected: str,
    describe: Callable[[dict[str, Any]], str],
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """List, then follow the watch of `list_call` until `done(objects by name)`; return them.

    The watch is reopened every WATCH_CHUNK_S (and after an error: the API may still be starting), so the
    deadline, a cancelled run and `stop` are all noticed within about a second.
    """
    deadline = time.monotonic() + timeout
    objects: dict[str, Any] = {}
    resource_version = ""
    last_error: BaseException | None = None
    while True:
        check_cancelled()
        if stop is not None and stop.is_set():
            raise Cancelled(f"stopped while waiting for {expected}")
        if objects and done(objects):
            return objects
        if time.monotonic() >= deadline:
            error = f"\nlast error: {last_error!r}" if last_error else ""
            seen = describe(objects)
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {expected}\nlast seen: {seen}{error}")
        try:
            if not resource_version:
                listed = list_call()
                objects = {o.metadata.name: o for o in listed.items}
                resource_version = listed.metadata.resource_version
                continue
            chunk = max(1, min(WATCH_CHUNK_S, int(deadline - time.monotonic()) or 1))
            for event in watch.Watch().stream(list_call, resource_version=resource_version, timeout_seconds=chunk):
                obj = event["object"]
                if event["type"] == "DELETED":
                    objects.pop(obj.metadata.name, None)
                elif event["type"] in ("ADDED", "MODIFIED"):
                    objects[obj.metadata.name] = obj
                resource_version = obj.metadata.resource_version or resource_version
                if done(objects):
                    return objects
        except TRANSIENT as exc:  # 410 Gone or a dropped connection: list again
            last_error = exc
            resource_version = ""
            time.sleep(0.05)


def side_by_side(waits: dict[str, Callable[[threading.Event], None]], since: float) -> dict[str, float]:
    """Run the waits at once; return, per wait, the seconds from `since` (time.monotonic()) to its end.

    The first failure stops the others (they get the stop event) and is raised; so is an interrupt.
    """
    stop = threading.Event()
    ended: dict[str, float] = {}

    def run(name: str, fn: Callable[[threading.Event], None]) -> None:
        fn(stop)
        ended[name] = time.monotonic() - since

    pool = ThreadPoolExecutor(max_workers=len(waits), thread_name_prefix="ready")
    futures = [pool.submit(run, name, fn) for name, fn in waits.items()]
    try:
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future in finished and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
        return ended
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
