"""Throughput of the fake fabric manager on loopback.

Starts ``fake-fabric-manager`` as its own process (so client and server do not share a GIL) on 127.0.0.1 with a
free port, zero attach/detach time and a throwaway database, then measures for a bounded time and count:
  (a) GET /v1/attachments (with half the devices attached),
  (b) attach + detach cycles, each worker on its own device.
It stops the server and exits by itself. Usage:
  python bench/bench_fabric.py [--seconds 5] [--max-requests 20000] [--workers 4] [--devices 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml


def bench_fabric(devices: int) -> dict[str, Any]:
    return {
        "attachSeconds": 0,
        "detachSeconds": 0,
        "fabrics": [{"id": "bench", "nodes": ["node-0"], "devices": [{"model": "gpu", "count": devices}]}],
    }


def start_server(workdir: Path, document: dict[str, Any]) -> tuple[subprocess.Popen[bytes], int]:
    """Start fake-fabric-manager on a free loopback port with the fabric `document`; returns (process, port)."""
    config = workdir / "fabric.yaml"
    config.write_text(yaml.safe_dump(document))
    port_file = workdir / "port"
    script = Path(sys.executable).parent / "fake-fabric-manager"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "fake_drivers.fabric"]
    command += ["--config", str(config), "--db", str(workdir / "state.db"), "--port", "0"]
    command += ["--port-file", str(port_file), "--no-access-log", "--log-level", "warning"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("fabric manager did not start")
        time.sleep(0.05)
    return proc, int(port_file.read_text())


class Client:
    """Keep-alive HTTP/1.1 connection (stdlib, so client overhead stays small next to the server's)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        self.conn.request(method, path, body=payload, headers=headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())

    def close(self) -> None:
        self.conn.close()


def run_phase(
    name: str,
    port: int,
    workers: int,
    seconds: float,
    max_units: int,
    unit: Callable[[Client, int], int],
) -> dict[str, Any]:
    """Run ``unit`` (returns the requests it made) in every worker until the time or the count runs out."""
    lock = threading.Lock()
    done = {"units": 0, "requests": 0, "errors": 0}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    def worker(index: int) -> None:
        client = Client(port)
        try:
            while time.monotonic() < deadline:
                with lock:
                    if done["units"] >= max_units:
                        return
                    done["units"] += 1
                started = time.perf_counter()
                try:
                    requests = unit(client, index)
                except (AssertionError, OSError, http.client.HTTPException):
                    with lock:
                        done["errors"] += 1
                    client.close()
                    client = Client(port)
                    continue
                elapsed = time.perf_counter() - started
                with lock:
                    done["requests"] += requests
                    latencies.append(elapsed)
        finally:
            client.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    wall = time.perf_counter() - started
    latencies.sort()
    return {
        "phase": name,
        "workers": workers,
        "seconds": round(wall, 2),
        "units": len(latencies),
        "requests": done["requests"],
        "errors": done["errors"],
        "requests_per_second": round(done["requests"] / wall, 1),
        "units_per_second": round(len(latencies) / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2) if latencies else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="time per phase (bounded)")
    parser.add_argument("--max-requests", type=int, default=20000, help="requests (a) / cycles (b) per phase")
    parser.add_argument("--workers", type=int, default=4, help="client threads, one connection each")
    parser.add_argument("--devices", type=int, default=64)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if not 1 <= args.workers <= args.devices // 2:
        parser.error("need 1 <= workers <= devices/2 (each attach/detach worker owns a free device)")

    with tempfile.TemporaryDirectory(prefix="bench-fabric-") as tmp:
        proc, port = start_server(Path(tmp), bench_fabric(args.devices))
        try:
            setup = Client(port)
            _, listing = setup.request("GET", "/v1/devices")
            uuids = [device["uuid"] for device in listing["devices"]]
            # Half attached, so the probe returns a realistic list; the other half is for the cycles.
            for uuid in uuids[: len(uuids) // 2]:
                status, _ = setup.request("POST", f"/v1/devices/{uuid}/attach", {"node": "node-0"})
                assert status == 200
            setup.close()
            free = uuids[len(uuids) // 2 :]

            def probe(client: Client, _: int) -> int:
                status, body = client.request("GET", "/v1/attachments")
                assert status == 200 and len(body["attachments"]) == len(uuids) // 2
                return 1

            def cycle(client: Client, index: int) -> int:
                uuid = free[index]
                status, _ = client.request("POST", f"/v1/devices/{uuid}/attach", {"node": "node-0"})
                assert status == 200
                status, _ = client.request("POST", f"/v1/devices/{uuid}/detach")
                assert status == 200
                return 2

            results = [
                run_phase("GET /v1/attachments", port, args.workers, args.seconds, args.max_requests, probe),
                run_phase("attach+detach cycle", port, args.workers, args.seconds, args.max_requests // 2, cycle),
            ]
        finally:
            proc.terminate()
            proc.wait(30)

    print(f"fake fabric manager on 127.0.0.1, {os.cpu_count()} CPUs, {args.workers} client connections")
    for result in results:
        print(
            f"{result['phase']:<22} {result['requests_per_second']:>8.1f} req/s "
            f"({result['units_per_second']:.1f} units/s, {result['units']} units in {result['seconds']} s, "
            f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, errors {result['errors']})"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
