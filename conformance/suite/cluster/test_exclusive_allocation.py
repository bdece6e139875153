"""SCH-9: kube-scheduler allocates a device to at most one claim at a time, judged over every claim of the whole run
(the suite's own drivers and the implementation's), once every scenario has ended (observe/allocations.py).

No scenario of its own: every allocation any scenario caused is evidence. It matters most under load: seen on
Kubernetes 1.37.2 with 1000 pods (SCALE-1), where pods whose PreBind had timed out were bound after all and their
devices were then allocated again to other claims. An implementation scenario that saw such a double allocation is
left unjudged (skipped, with the evidence), not failed: no implementation can prevent what the allocator does.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.observe.allocations import Judgement, judge
from conformance.observe.recorder import Recorder
from conformance.suite.scenario import ScenarioRunner

SHOWN = 20  # double allocations listed in the failure message (all are counted)


@pytest.fixture
def judged(recorder: Recorder, scenarios_started: list[ScenarioRunner], record_property: Any) -> Judgement:
    for runner in scenarios_started:
        runner.wait_all()
    found = judge(recorder.select(("claim",)))
    record_property("claims_judged", found.claims)
    record_property("allocations_judged", len(found.holdings))
    record_property("records_dropped", recorder.dropped)
    return found


@pytest.mark.run_wide
@pytest.mark.requirement("SCH-9")
def test_no_device_is_allocated_to_two_claims_at_once(judged: Judgement, recorder: Recorder) -> None:
    assert not judged.doubles, (
        f"{len(judged.doubles)} times a device was allocated to a claim while another claim held it:\n  "
        + "\n  ".join(str(d) for d in judged.doubles[:SHOWN])
    )
    if not judged.holdings:
        pytest.skip("no claim was allocated in this run: nothing to judge")
    if recorder.dropped:
        pytest.skip(
            f"judged {len(judged.holdings)} allocations, but the record dropped {recorder.dropped} changes past its "
            "bound: allocations after that were not seen"
        )
