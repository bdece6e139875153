"""One point of `make scale` (N nodes, P pods), end to end in its own process: the cluster brought up, the reference
fabric manager and controller started on fabrics that reach every node, the run-wide record and invariant watcher
following everything, the two waves (stress.py), the components' histograms scraped around each wave, the run-wide
rules judged, every process's memory and CPU read; the cluster always torn down. Writes one JSON document.

Its own process so that the suite's memory figures (peak RSS) belong to this point alone:
`python -m conformance.scale.point --nodes N --pods P --out FILE` (the `dra-conformance scale` command runs one per
point).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.cluster.client import Cluster
from conformance.cluster.providers.base import default_nodes
from conformance.cluster.providers.local import LocalProvider
from conformance.cluster.providers.local.components import GOGC_ENV
from conformance.cluster.versions import parse_version
from conformance.cluster.waits import wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import load_profile
from conformance.observe.attachments import Judge
from conformance.observe.invariants import SCHEDULER_FAULT, InvariantWatcher
from conformance.observe.recorder import Recorder
from conformance.scale.bringup import BringUp, bring_up
from conformance.scale.components import apiserver_figures, scheduler_figures, served_names
from conformance.scale.metrics import Scraper
from conformance.scale.stack import DRIVER, IDENTITY, MODEL, write_stack
from conformance.scale.stress import Stress, baseline_pool, driver_class
from conformance.scale.usage import Phases, as_figures, snapshot
from conformance.scale.waves import figures as wave_figures

BINDING_TIMEOUT_S = 1800  # the most a pod may wait in PreBind: the stress fits inside it, even on a loaded machine
PUBLISH_TIMEOUT_S = 300.0
STALL_S = 300.0  # a wait fails only after this long without progress: the machine's load sets the pace


def _say(message: str) -> None:
    print(f"{datetime.datetime.now().strftime('%H:%M:%S')} [scale] {message}", file=sys.stderr, flush=True)


def _fabric_slices(cluster: Cluster) -> tuple[int, int]:
    """(devices, slices) of the reference's fabric pools as published now."""
    slices = [
        s
        for s in cluster.resource.list_resource_slice(field_selector=f"spec.driver={DRIVER}").items
        if not s.spec.node_name
    ]
    return sum(len(s.spec.devices or []) for s in slices), len(slices)


def _correctness(watcher: InvariantWatcher, record: Recorder, detach_s: float) -> dict[str, Any]:
    """The run-wide rules over the whole stress: the invariant watcher's violations by kind (the scheduler's double
    allocations apart), the fabric-truth rules IMP-10/11, and what judging them cost."""
    started = time.monotonic()
    watcher.stop()
    kinds = Counter(v.what for v in watcher.violations)
    verdicts = Judge(DRIVER, IDENTITY, detach_s).judge(record)
    judged = time.monotonic() - started
    return {
        "violations": {k: n for k, n in kinds.items() if k != SCHEDULER_FAULT},
        "schedulerDoubleAllocations": kinds.get(SCHEDULER_FAULT, 0),
        "examples": [str(v) for v in watcher.violations[:5]],
        "watcherEvaluations": watcher.evaluations,
        "fabricTruth": {
            rule: {"checked": verdicts.checked.get(rule, 0), "violations": len(verdicts.violations.get(rule, []))}
            for rule in ("IMP-10", "IMP-11", "IMP-12")
        },
        "fabricTruthExamples": [m for found in verdicts.violations.values() for m in found[:2]],
        "judgeSeconds": round(judged, 1),
    }


def run_point(out: dict[str, Any], nodes: int, pods: int, fabrics: int, version: str, workdir: Path, gogc: str) -> None:
    """Fill `out` with the point's figures (what was measured before a failure stays there)."""
    os.environ[GOGC_ENV] = gogc  # the components' garbage collector as a real cluster runs it (the suite's: 400)
    specs = default_nodes(nodes, fabrics)
    run_id = uuid.uuid4().hex[:8]
    shutil.rmtree(workdir, ignore_errors=True)  # a previous point's state (credentials of its cluster) is stale
    out |= {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "kubernetes": version,
        "machine": f"{os.cpu_count()} CPUs, {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} "
        f"GiB, {platform.machine()}",
        "nodes": nodes,
        "pods": pods,
        "fabrics": fabrics,
        "gogc": gogc,
        "load1mAtStart": round(os.getloadavg()[0], 1),
    }
    phases = Phases(marker="")
    up = BringUp(LocalProvider(progress=_say))
    impl: Implementation | None = None
    record: Recorder | None = None
    started = time.monotonic()
    try:
        info = bring_up(parse_version(version), specs, BINDING_TIMEOUT_S, STALL_S, phases, _say, up)
        out["bringUp"] = up.figures
        cluster = Cluster(info)
        baseline, slices = baseline_pool(cluster, pods, [n.name for n in specs])
        profile_path, devices = write_stack(workdir / "stack", specs, fabrics, pods)
        impl = Implementation(load_profile(profile_path), info.kubeconfig, workdir / "implementation", progress=_say)
        impl.start()
        phases.others = {r.name: [r.proc.pid] for r in impl.running}
        published = wait_for(
            lambda: _fabric_slices(cluster),
            lambda found: found[0] >= devices,
            timeout=PUBLISH_TIMEOUT_S,
            expected=f"the reference controller to publish {devices} fabric devices",
        )
        out["slices"] = {"nodeLocal": slices, "fabricDevices": published[0], "fabricSlices": published[1]}
        phases.end("implementationReady")
        record = Recorder(Cluster(info), run_id, IDENTITY).start()
        record.probe(impl.resolve("{url:fabric-manager}/v1/attachments"))
        stress = Stress(cluster, record, run_id, pods, _say, STALL_S, phases.guard)
        watcher = InvariantWatcher(record, DRIVER, IDENTITY).start()
        phases.end("recordSynced")
        scrape = Scraper(info.scheduler_endpoint, info.kubeconfig, cluster.raw_get)
        waves = out["waves"] = {}
        s0, a0 = scrape.both()
        without = stress.without_conditions(baseline)
        s1, a1 = scrape.both()
        phases.end("waveWithout")
        waves["withoutConditions"] = wave_figures(without.moments) | {
            "scheduler": scheduler_figures(s0, s1),
            "resourceclaimsStatusWrites": apiserver_figures(a0, a1),
        }
        faults = FaultInjector(impl.resolve("{url:fabric-manager}/v1/faults"), frozenset())
        with_ = stress.with_conditions(driver_class(cluster, DRIVER, f"scale-fabric-{run_id}"), faults, MODEL)
        s2, a2 = scrape.both()
        phases.end("waveWith")
        out["schedulerMetrics"] = served_names(s2)
        waves["withConditions"] = wave_figures(with_.moments, with_.released) | {
            "heldAttaches": with_.held,
            "scheduler": scheduler_figures(s1, s2),
            "resourceclaimsStatusWrites": apiserver_figures(a1, a2),
        }
        out["correctness"] = _correctness(watcher, record, impl.loaded.profile.promises.detach_s)
        phases.end("judged")
    except BaseException:
        phases.end("untilStopped")  # the phase that did not end: its time and CPU
        raise
    finally:
        if phases.marker:  # before anything stops: peak memory and CPU of every process, also of a failed point
            out["processes"] = as_figures(snapshot(phases.marker, phases.others))
        if record is not None:
            out["record"] = record.stats()
            record.stop()
        if impl is not None:
            impl.stop()
        up.provider.stop()
        out["phases"] = phases.phases
        out["suiteRssMiB"] = phases.suite_rss
        out["leastAvailableGiB"] = round(phases.least_available / 2**30, 1) if phases.least_available else None
        out["wallSeconds"] = round(time.monotonic() - started, 1)
        out["load1mAtEnd"] = round(os.getloadavg()[0], 1)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # the finally above tears the cluster down


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--fabrics", type=int, default=4)
    parser.add_argument("--k8s-version", default="1.37.2")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gogc", default="100", help="GOGC of every control-plane component (Go's default: 100)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    figures: dict[str, Any] = {}
    try:
        run_point(figures, args.nodes, args.pods, args.fabrics, args.k8s_version, args.workdir, args.gogc)
    except BaseException as exc:
        figures["failed"] = repr(exc)[:4000]
        raise
    finally:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
