"""IMP-10..12: the fabric's truth for every device of every implementation scenario, judged once all of them have
ended, from the run-wide record (conformance/observe/attachments.py says how each moment is compared).

Not a scenario of its own: it reads what the others did. At the end it waits (from the record, up to detachSeconds)
until the fabric holds no attachment of the run, then judges; an attachment still held then is a failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.profile import LoadedProfile
from conformance.observe.attachments import Judge, Verdicts, stamp
from conformance.observe.recorder import PROBE_PERIOD_S, Recorder
from conformance.suite.scenario import ScenarioRunner


@dataclass
class Truth:
    verdicts: Verdicts
    judged_s: float  # how long judging the whole record took
    waited_s: float  # how long the end of the run waited for the fabric to let go
    left: dict[str, tuple[str, str]]  # the run's attachments the fabric still held at the end


@pytest.fixture(scope="module")
def truth(scenarios: ScenarioRunner, profile: LoadedProfile, recorder: Recorder) -> Truth:
    prof = profile.profile
    if prof.fabric_probe is None:
        pytest.skip("the profile declares no fabricProbe: attachments cannot be observed")
    if not scenarios.wait_all():
        pytest.skip("no implementation scenario ran in this session: nothing to judge")
    before = set(recorder.samples()[0].states) if recorder.samples() else set()
    began = time.monotonic()
    try:
        left = wait_for(
            lambda: {i: s for i, s in recorder.now().items() if i not in before},
            lambda left: not left,
            timeout=prof.promises.detach_s + 2 * PROBE_PERIOD_S,
            expected="the fabric to hold no attachment of the run once every scenario has ended",
            interval=PROBE_PERIOD_S,
            max_interval=PROBE_PERIOD_S,
        )
    except WaitTimeout:
        left = {i: s for i, s in recorder.now().items() if i not in before}
    waited = time.monotonic() - began
    began = time.monotonic()
    verdicts = Judge(prof.driver, prof.identity_attribute, prof.promises.detach_s).judge(recorder)
    return Truth(verdicts, round(time.monotonic() - began, 3), round(waited, 3), left)


def _verdict(truth: Truth, rule: str, record_property: Any) -> None:
    v = truth.verdicts
    record_property("probe_period_seconds", PROBE_PERIOD_S)
    record_property("judged", v.checked.get(rule, 0))
    record_property("judge_seconds", truth.judged_s)
    for note in v.unjudged.get(rule, [])[:20]:
        record_property("not_judged", note)
    found = v.violations.get(rule, [])
    assert not found, f"{len(found)} violations (probe period {PROBE_PERIOD_S:g}s):\n  " + "\n  ".join(found[:20])
    if not v.checked.get(rule):
        pytest.skip(f"{rule}: nothing could be judged: {v.unjudged.get(rule, ['no device was used'])[:3]}")


@pytest.mark.requirement("IMP-10")
def test_a_device_stays_attached_to_the_node_of_every_pod_using_it(truth: Truth, record_property: Any) -> None:
    _verdict(truth, "IMP-10", record_property)


@pytest.mark.requirement("IMP-11")
def test_binding_conditions_are_true_only_while_the_fabric_says_attached(truth: Truth, record_property: Any) -> None:
    _verdict(truth, "IMP-11", record_property)


@pytest.mark.requirement("IMP-12")
def test_no_attachment_outlives_its_claim(truth: Truth, record_property: Any) -> None:
    record_property("end_wait_seconds", truth.waited_s)
    assert not truth.left, (
        f"at the end of the run ({stamp(time.time())}), every scenario ended, the fabric still holds attachments of "
        f"the run: {truth.left}"
    )
    _verdict(truth, "IMP-12", record_property)
