"""One lifecycle run end to end: its own cluster brought up, the procedure (gates.py, upgrade.py), the reports
written, the cluster always torn down (also on a failure or Ctrl-C). A procedure that stops early (the cluster did not
do what later steps build on, a wait ran out, a component did not come back) keeps every check made so far: the
requirements it reached are judged on them, the others reported not judged with the cause."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import unique_driver
from conformance.cluster.providers.base import ProviderNotReady
from conformance.cluster.versions import KubeVersion
from conformance.cluster.waits import WaitTimeout
from conformance.lifecycle.controlplane import ControlPlane, binaries_of
from conformance.lifecycle.gates import KEP as GATES_KEP
from conformance.lifecycle.gates import GatesRun, Stop
from conformance.lifecycle.ledger import Ledger
from conformance.lifecycle.report import write_reports
from conformance.lifecycle.upgrade import UpgradeRun
from conformance.lifecycle.world import World
from conformance.report.gather import Artefacts
from conformance.report.reasons import headline

# What ends a procedure early with its cause (anything else is a bug of the suite, raised).
STOPS: tuple[type[BaseException], ...] = (Stop, WaitTimeout, ProviderNotReady, ApiException)


def _say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} [lifecycle] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Outcome:
    out: Path
    bundle: Path
    result: str  # success, partial, failure
    summary: dict[str, dict[str, Any]]


def run_gates(
    version: KubeVersion, out: Path, variant: str | None = None, say: Callable[[str], None] = _say
) -> Outcome:
    """`dra-conformance lifecycle gates`: the gate off and on again on one cluster of `version`; on a release whose
    gate is locked on (1.38) nothing is started and GATE-1..3 are written not applicable, with the reason."""
    ledger = Ledger("gates")
    if reason := version.release.gate_off_reason("DRADeviceBindingConditions"):
        ledger.not_applicable = f"Kubernetes {version}: {reason}; the gate cannot be switched off there"
        ledger.find("PRR-2", GATES_KEP["PRR-2"], f"not on Kubernetes {version}: {reason}", False)
        say(f"not applicable: {ledger.not_applicable}")
        return _written(out, ledger, {"kubernetes": str(version), "provider": "local"}, variant, say)
    plane = ControlPlane(version, say)
    components = _drive(plane, ledger, out, say, lambda world: GatesRun(plane, world, ledger, variant).run())
    cluster = {"kubernetes": str(version), "provider": "local", "components": components}
    return _written(out, ledger, cluster, variant, say)


def _drive(
    plane: ControlPlane, ledger: Ledger, out: Path, say: Callable[[str], None], run: Callable[[World], Any]
) -> dict:
    """Start the cluster, run the procedure on it, note where it stopped; keep the components' logs (every restart is
    marked in them: the cause of a stop is often only there); the components it ran, once stopped."""
    try:
        info = plane.start()
        run(World(Cluster(info), unique_driver("life"), [n.name for n in info.nodes]))
    except STOPS as exc:
        ledger.stopped = stopped(exc)
        say(f"stopped: {ledger.stopped}")
    finally:
        components = plane.describe() if plane.release else {}
        if (workdir := plane.workdir) is not None:
            ledger.logs = Artefacts(out / "artefacts").copy_logs(workdir, "control-plane", "control-plane logs")
        plane.stop()
    return components


def run_upgrade(
    old: KubeVersion, new: KubeVersion, out: Path, variant: str | None = None, say: Callable[[str], None] = _say
) -> Outcome:
    """`dra-conformance lifecycle upgrade`: OLD -> NEW -> OLD -> NEW on one etcd; the first step is the skew."""
    if (new.major, new.minor) != (old.major, old.minor + 1):
        raise ValueError(f"{old} -> {new}: upgrade and skew are judged between adjacent minors only")
    binaries_of(new)  # before anything starts: a release without cached binaries is said at once (NotCached)
    ledger = Ledger("upgrade")
    plane = ControlPlane(old, say)
    components = _drive(
        plane, ledger, out, say, lambda world: UpgradeRun(plane, world, ledger, old, new, variant).run()
    )
    cluster = {"kubernetes": str(new), "provider": "local", "upgradedFrom": str(old), "components": components}
    return _written(out, ledger, cluster, variant, say)


def stopped(exc: BaseException) -> str:
    """Why a procedure stopped, in one line: the cause first, then what was last seen (a wait's second line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    text = "; ".join(lines[:3])
    return text if len(text) <= 800 else text[:797] + "..."


def _written(
    out: Path, ledger: Ledger, cluster: dict[str, Any], variant: str | None, say: Callable[[str], None]
) -> Outcome:
    bundle, result = write_reports(out, ledger, cluster, variant)
    summary = ledger.summary()
    for rid, e in summary.items():
        if e["outcome"] != "not-covered":
            say(f"{rid} {e['outcome']}" + (f": {headline(e['reason'], 200)}" if e["reason"] else ""))
    for f in ledger.findings:
        say(f"{f.question} {'agrees' if f.agrees else 'DIFFERS'}: {f.measured}")
    say(f"{ledger.kind} run {result} in {ledger.seconds:.0f}s; reports in {out} ({bundle.name})")
    return Outcome(out, bundle, result, summary)
