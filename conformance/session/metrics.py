"""The session's window on kube-scheduler's binding-conditions metrics (SCH-10): opened with a first scrape before
any scenario starts, judged at the end by the run-wide test, written into the conformance report."""

from __future__ import annotations

import pytest

from conformance.cluster.client import Cluster
from conformance.observe.prebind_metrics import MetricsRun

METRICS_KEY = pytest.StashKey[MetricsRun]()


@pytest.fixture(scope="session")
def scheduler_metrics(cluster: Cluster, pytestconfig: pytest.Config) -> MetricsRun:
    """The metrics window of the run (the reporter reads it from the stash: its `schedulerMetrics`)."""
    run = MetricsRun.open(cluster.info)
    pytestconfig.stash[METRICS_KEY] = run
    return run
