"""SCH-11: no control-plane component crashed while the run drove DRA with binding conditions through the cluster,
judged once every scenario has ended from the provider's watch of the components (local: watchdog.py, which also
started each crashed one again, so the later scenarios were judged on a cluster that recovered as a real one does;
kind and existing clusters: the restarts of kube-system's static control-plane pods, cluster/staticpods.py).

No scenario of its own: every scenario's DeviceTaintRules, slices and claims are the workload. A crash fails only
this requirement: the scenarios it disturbed say so in their own lines (their waits name what they last saw).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.defects import PROPERTY, TRACKER_PANIC, known_defect
from conformance.cluster.providers.base import Crash
from conformance.suite.scenario import ScenarioRunner

TRACKER_FRAME = "resourceslice/tracker."  # the DRA ResourceSlice tracker (k8s.io/dynamic-resource-allocation)


def explained_by_tracker_panic(crash: Crash) -> bool:
    """The known upstream defect's exact symptom: kube-scheduler panicked inside the ResourceSlice tracker."""
    return crash.component == "kube-scheduler" and crash.cause.startswith("panic:") and TRACKER_FRAME in crash.frame


@pytest.mark.run_wide
@pytest.mark.requirement("SCH-11")
def test_no_control_plane_component_crashed(
    control_plane_crashes: Callable[[], list[Crash] | None],
    scenarios_started: list[ScenarioRunner],
    cluster: Cluster,
    record_property: Any,
) -> None:
    for runner in scenarios_started:
        runner.wait_all()
    crashes = control_plane_crashes()
    if crashes is None:
        pytest.skip(
            f"the {cluster.info.provider} cluster's control-plane components are not visible to the suite (no pod "
            "labelled tier=control-plane in kube-system that it may list, as on a managed control plane): a crash "
            "shows only as the failures of the scenarios it disturbed"
        )
    record_property("component_crashes", len(crashes))
    if not crashes:
        return
    defect = known_defect("SCH-11", TRACKER_PANIC, cluster.info.version)
    known = defect if defect is not None and all(explained_by_tracker_panic(c) for c in crashes) else None
    if known is not None:
        record_property(PROPERTY, known.id)
    lines = [c.line() for c in crashes]
    pytest.fail(
        f"{len(crashes)} control-plane crash{'es' if len(crashes) > 1 else ''} during the run: {lines[0]}"
        + "".join(f"\n  {line}" for line in lines[1:])
        + (f"\n{known.label()}: {known.summary}" if known else ""),
        pytrace=False,
    )
