"""The order of the stack's steps for every device of every implementation scenario, judged once all of them have
ended, from the run-wide record's revisions (conformance/observe/order.py says how each clause is compared): a
failed device out of offer no later than its failure is reported (IMP-4; RDY-5 for a readiness gate), a reschedule
only once the node-local copy is published (IMP-7), binding conditions True only once the device is attached to that
node (IMP-3), a detach only after the last pod using the device is gone (IMP-10).

No scenario of its own: the paths are walked by the others (attach-failure, readiness-failure, the reschedule-to-local
moves, small-pool-churn, which walks all four in one short run). A test whose clause met nothing in this run skips,
saying so; the first line of a failure names the claim, the device, the node and the revisions of both events.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.implementation.profile import LoadedProfile
from conformance.observe import order
from conformance.observe.recorder import Recorder
from conformance.suite.judged import nothing_judged
from conformance.suite.scenario import ScenarioRunner

NOTHING = {
    order.HIDDEN: "no failure condition meaning `failure` was reported on an identified device in this run",
    order.COPY: "no condition meaning `reschedule` was set on a fabric entry in this run",
    order.ATTACHED: "no binding condition (nor one meaning `reschedule`) was True on a fabric device in this run",
    order.DETACH: "the probe saw no device detached from a node where a pod of the run had used it",
}


@pytest.fixture(scope="module")
def judged(scenarios: ScenarioRunner, profile: LoadedProfile, recorder: Recorder) -> order.Order:
    if not scenarios.wait_all():
        pytest.skip("no implementation scenario ran in this session: nothing to judge")
    prof = profile.profile
    meanings = dict(prof.failure_conditions)
    samples = recorder.samples() if prof.fabric_probe is not None else []
    found = order.judge(
        recorder.select(), samples, prof.driver, prof.identity_attribute, recorder.identities(), meanings
    )
    checked = ", ".join(f"{clause} {n}" for clause, n in sorted(found.verdicts.checked.items()))
    scenarios.say(f"order: {len(found.steps)} steps of the run's devices; judged {checked or 'nothing'}")
    return found


def _verdict(
    judged: order.Order, clause: str, recorder: Recorder, record_property: Any, failed: dict[str, str]
) -> None:
    v = judged.verdicts
    record_property("judged", v.checked.get(clause, 0))
    for note in v.unjudged.get(clause, [])[:20]:
        record_property("not_judged", note)
    found = v.violations.get(clause, [])
    if found:
        rest = "".join(f"\n  {f}" for f in found[1:20])
        pytest.fail(f"{found[0]}{rest}\n({len(found)} wrong orders; clause {clause}, observe/order.py)", pytrace=False)
    if not v.checked.get(clause):
        what = f"nothing to judge: {NOTHING[clause]}; not judged: {v.unjudged.get(clause, [])[:3]}"
        nothing_judged(what, failed, record_property)
    if recorder.dropped:
        pytest.skip(f"judged {v.checked[clause]}, but the record dropped {recorder.dropped} changes past its bound")


def _clause(clause: str, requirement: str, probe: bool = False) -> Any:
    """The test of one clause under its requirement (each test carries one id; a function per test for the reports and
    the requirement reference, which read the marks of the module's functions)."""

    @pytest.mark.run_wide
    @pytest.mark.requirement(requirement)
    def test(
        judged: order.Order,
        profile: LoadedProfile,
        recorder: Recorder,
        record_property: Any,
        scenarios: ScenarioRunner,
    ) -> None:
        if probe and profile.profile.fabric_probe is None:
            pytest.skip("the profile declares no fabricProbe: attachments cannot be observed")
        _verdict(judged, clause, recorder, record_property, scenarios.failures())

    return test


test_a_failed_device_is_out_of_offer_when_its_failure_is_reported = _clause(order.HIDDEN, "IMP-4")
test_a_device_whose_readying_failed_is_unpublished_when_its_failure_is_reported = _clause(order.HIDDEN, "RDY-5")
test_a_reschedule_is_asked_for_only_once_the_node_local_copy_is_published = _clause(order.COPY, "IMP-7")
test_binding_conditions_are_true_only_once_attached_to_that_node = _clause(order.ATTACHED, "IMP-3", probe=True)
test_a_detach_begins_only_after_the_last_pod_using_the_device_is_gone = _clause(order.DETACH, "IMP-10", probe=True)
