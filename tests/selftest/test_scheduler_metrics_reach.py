"""SCH-10 on a cluster the suite did not start (the existing provider over this session's local cluster): with
kube-scheduler's secure port given (--scheduler-url) the metrics are reconciled (at least what the record saw: others
may schedule there), and with a port nobody listens on SCH-10 is skipped with that reason, never passed.

Runs the real suite in subprocesses against the session's cluster: run it through the shared cluster slots.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.cluster.client import Cluster
from selftest.suite_runner import on_existing, run_suite

TESTS = ("conformance/suite/cluster/test_scheduler_metrics.py", "conformance/suite/cluster/test_binding_gate.py")


def _sch10(cluster: Cluster, tmp_path: Path, scheduler_url: str) -> tuple[str, str]:
    """SCH-10's outcome and reason in the certification JUnit of a run with `scheduler_url`."""
    reports = tmp_path / "reports"
    code, out, _ = run_suite(
        tmp_path / "junit.xml",
        *on_existing(cluster.info.kubeconfig, Path("none")),
        f"--scheduler-url={scheduler_url}",
        f"--reports-dir={reports}",
        TESTS[1],
        target=TESTS[0],
    )
    assert code in (0, 6), out[-3000:]
    for case in ET.parse(reports / "certification-junit.xml").getroot().iter("testcase"):
        if (case.get("name") or "").startswith("SCH-10 "):
            for kind in ("failure", "skipped"):
                if (found := case.find(kind)) is not None:
                    return kind, found.get("message") or ""
            return "passed", ""
    raise AssertionError(f"no SCH-10 case in the certification JUnit:\n{out[-3000:]}")


def test_metrics_out_of_reach_skip_sch_10_with_the_reason(cluster: Cluster, tmp_path: Path) -> None:
    outcome, reason = _sch10(cluster, tmp_path, "https://127.0.0.1:9")
    assert outcome == "skipped" and "kube-scheduler's /metrics cannot be read" in reason, reason


def test_metrics_in_reach_are_reconciled_on_an_existing_cluster(cluster: Cluster, tmp_path: Path) -> None:
    assert cluster.info.scheduler_endpoint
    assert _sch10(cluster, tmp_path, cluster.info.scheduler_endpoint) == ("passed", "")
