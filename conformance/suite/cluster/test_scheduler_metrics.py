"""SCH-10: kube-scheduler's binding-conditions metrics count every PreBind wait the run caused, by outcome, judged
over the whole run once every scenario has ended (observe/prebind_metrics.py).

No scenario of its own: every scenario's PreBind waits are evidence, and each scenario's own driver name tells them
apart in the metrics' `driver` label (the binding-timeout scenario's shows as status=timeout, failure-reschedule's as
status=failure). The window opens with a scrape before the first scenario (session/metrics.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.cluster.client import Cluster
from conformance.observe.prebind import Wait, prebind_waits
from conformance.observe.prebind_metrics import MetricsRun, MetricsUnreadable
from conformance.observe.recorder import Recorder
from conformance.suite.scenario import REGISTRY, ScenarioRunner


@pytest.mark.run_wide
@pytest.mark.requirement("SCH-10")
def test_metrics_count_every_prebind_wait(
    scheduler_metrics: MetricsRun,
    recorder: Recorder,
    scenarios_started: list[ScenarioRunner],
    cluster: Cluster,
    record_property: Any,
) -> None:
    for runner in scenarios_started:
        runner.wait_all()
    if scheduler_metrics.unreadable:
        pytest.skip(scheduler_metrics.unreadable)
    waits = prebind_waits(recorder.select(("claim", "pod")), cluster.info.binding_timeout_s)
    record_property("prebind_waits", len(waits))
    if not waits:
        scheduler_metrics.skipped = "no PreBind waited on binding conditions in this run: nothing to reconcile"
        pytest.skip(scheduler_metrics.skipped)
    if recorder.dropped:
        scheduler_metrics.skipped = (
            f"the record dropped {recorder.dropped} changes past its bound: PreBind waits after that were not seen"
        )
        pytest.skip(scheduler_metrics.skipped)
    try:
        result = scheduler_metrics.settle(waits, at_least=_not_cluster_scenarios(waits))
    except MetricsUnreadable as exc:
        scheduler_metrics.skipped = str(exc)
        pytest.skip(scheduler_metrics.skipped)
    record_property("scrapes", scheduler_metrics.scrapes)
    if problems := result.problems():
        pytest.fail(
            f"kube-scheduler's binding-conditions metrics do not account for the run's {len(waits)} PreBind waits "
            f"({result.as_report()['judged']}):\n  "
            + "\n  ".join(problems)
            + "\nper driver and status (counted: allocations_total; observed: wait_duration_seconds; record: what the "
            "run's waits allow):\n  " + "\n  ".join(result.table()),
            pytrace=False,
        )


def _not_cluster_scenarios(waits: list[Wait]) -> frozenset[str]:
    """Drivers with a wait outside the cluster scenarios' namespaces (the implementation's, the coexistence
    driver's): judged "at least"; the suite's own cluster scenarios' drivers are judged equal."""
    cluster = {sc.name for sc in REGISTRY.values() if not sc.implementation}
    return frozenset(
        driver for wait in waits for driver in wait.devices if wait.pod.split("/")[0].rsplit("-", 1)[0] not in cluster
    )
