"""How many attaches the reference controller runs at once, and how long N concurrent attaches take.

The real fabric manager runs as a process (--devices devices on one fabric, --attach-seconds each); the
controller's reconciler runs in this process with --workers workers against N claims allocated at once, with the
Kubernetes side replaced by in-memory fakes (tests/controller/test_reconciler.py), so the figure is the
controller's and the fabric's pace alone, not the apiserver's. It prints, per worker count: time until every
device is attached and its condition written, and the peak of attaches in flight (sampled from the fabric).
A benchmark prints figures; it passes or fails nothing. Usage (from fake-drivers/):
  python bench/bench_attach_workers.py [--claims 200] [--devices 1000] [--attach-seconds 1.0] [--workers 16 32]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "controller"), str(HERE.parent / "tests" / "fabric")]

from fabric_harness import FabricProcess, write_config  # noqa: E402
from test_decide import KEEP, claim_obj  # noqa: E402
from test_reconciler import FakeCache, FakeKube  # noqa: E402

from fake_drivers.controller.fabric import FabricClient  # noqa: E402
from fake_drivers.controller.metrics import Metrics  # noqa: E402
from fake_drivers.controller.reconciler import Caches, Reconciler  # noqa: E402


@dataclass
class ReportingKube(FakeKube):
    """Remembers which claims got their binding condition (the fake never updates the claim itself)."""

    reported: set[str] = field(default_factory=set)

    def write_condition(self, write: Any, now: float, cached: dict[str, Any] | None = None) -> str:
        if write.type == KEEP.attached:
            self.reported.add(write.claim.key)
        return super().write_condition(write, now, cached)


def measure(url: str, claims: int, workers: int) -> tuple[float, int]:
    """Seconds until `claims` attaches are done and reported, and the peak of attaches in flight."""
    fabric = FabricClient(url, connections=workers + 2)
    kube = ReportingKube()
    reconciler = Reconciler(KEEP, kube, fabric, Metrics(), poll_s=0.05, workers=workers)  # type: ignore[arg-type]
    objects = [claim_obj(name=f"c{i}", device=f"fabric-0-fake-gpu-{i}", node="node-0") for i in range(claims)]
    reconciler.caches = Caches(FakeCache(objects), FakeCache(), FakeCache())  # type: ignore[arg-type]
    for cache in reconciler.caches.all():
        cache.synced.set()
    stop = threading.Event()
    loop = threading.Thread(target=reconciler.run, args=(stop,), daemon=True)
    peak = 0
    started = time.monotonic()
    loop.start()
    try:
        while len(kube.reported) < claims:
            devices = fabric.devices()
            peak = max(peak, sum(d.state == "attaching" for d in devices))
            time.sleep(0.05)
        return time.monotonic() - started, peak
    finally:
        stop.set()
        loop.join(10)
        for device in fabric.devices():  # leave the fabric as it was for the next worker count
            if device.state != "free":
                fabric.detach(device.uuid, None)
        fabric.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--attach-seconds", type=float, default=1.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[16, 32])
    args = parser.parse_args()
    spec = {
        "fabrics": [{"id": "fabric-0", "nodes": ["node-0"], "devices": [{"model": "fake-gpu", "count": args.devices}]}]
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = write_config(work / "fabric.yaml", attach_seconds=args.attach_seconds, fabric=spec)
        proc = FabricProcess.start(config, work / "fabric.db", work, "--no-access-log", "--detach-seconds", "0")
        try:
            for workers in args.workers:
                seconds, peak = measure(proc.url, args.claims, workers)
                ideal = -(-args.claims // workers) * args.attach_seconds
                print(
                    f"workers {workers:3d}: {args.claims} attaches of {args.attach_seconds} s done and reported in "
                    f"{seconds:.2f} s (ideal {ideal:.0f} s), peak {peak} in flight"
                )
        finally:
            proc.terminate()


if __name__ == "__main__":
    main()
