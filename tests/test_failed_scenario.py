"""A scenario's failure fails only what it is evidence of (suite/judged.py, docs/reports.md "A failed scenario's
requirements"): the rule per requirement, the runner handing over how far a scenario got, and a whole pytest run of a
fake scenario failing midway (pytester, in-process, the real plugin; no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.waits import WaitTimeout
from conformance.implementation.profile import API_VERSION, KIND, Profile
from conformance.report.outcomes import Outcomes, RunResult
from conformance.report.verdict import NOT_JUDGED, judge
from conformance.suite.judged import decide
from conformance.suite.record import Scenario, Step
from conformance.suite.runner import InvariantViolated, Progress, ScenarioFailed

pytest_plugins = ["pytester"]

ALLOCATED, BOUND = "the first allocation", "the pod bound"
GATE = Scenario(
    "gate",
    "d",
    ("RDY-1", "RDY-2", "RDY-3", "RDY-4"),
    lambda ctx: None,
    "m",
    readiness_for=("RDY-3", "RDY-4"),
    steps=(
        Step(ALLOCATED, evidence=("RDY-1",), owes=("RDY-1",)),
        Step(BOUND, evidence=("RDY-2", "RDY-3", "RDY-4"), owes=("RDY-2",)),
    ),
)
TIMEOUT = WaitTimeout("timed out after 27s waiting for the pod to be bound\n  last seen: allocated on node-1")


def _profile(probe: bool) -> Profile:
    raw: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "name": "p", "version": "1"}
    raw |= {"driver": "d.example.com", "bindingModel": "node-local"}
    if probe:
        raw["readinessProbe"] = {"url": "http://127.0.0.1:1/v1/readiness"}
    return Profile.model_validate(raw)


def _decisions(failed: ScenarioFailed, probe: bool = True, sc: Scenario = GATE) -> dict[str, tuple[str, str]]:
    return {r: (d.action, d.reason) for r in sc.requirements for d in [decide(sc, failed, r, _profile(probe))]}


def test_a_wait_that_ran_out_fails_the_requirement_it_owes_and_judges_the_evidence_before_it() -> None:
    found = _decisions(ScenarioFailed(TIMEOUT, "gate", Progress((ALLOCATED,), partial="so far")))
    assert (
        found["RDY-1"][0] == "judge" and "judged on what gate observed up to the first allocation" in found["RDY-1"][1]
    )
    assert found["RDY-2"] == ("fail", "")
    cause = "WaitTimeout: timed out after 27s waiting for the pod to be bound"
    assert found["RDY-3"] == ("not-judged", f"gate failed before the pod bound (cause: {cause})")
    assert found["RDY-4"] == found["RDY-3"]


def test_a_profile_gap_stays_a_skip_whatever_the_scenario_did() -> None:
    found = _decisions(ScenarioFailed(TIMEOUT, "gate", Progress((ALLOCATED,), partial="so far")), probe=False)
    assert found["RDY-3"][0] == found["RDY-4"][0] == "skip" and "no readinessProbe" in found["RDY-3"][1]
    assert found["RDY-2"] == ("fail", "")


def test_a_failure_before_the_first_step_is_that_steps_and_the_rest_are_not_judged() -> None:
    found = _decisions(ScenarioFailed(TIMEOUT, "gate", Progress()))
    assert found["RDY-1"] == ("fail", "")
    assert {found[r][0] for r in ("RDY-2", "RDY-3", "RDY-4")} == {"not-judged"}


def test_an_error_naming_requirements_and_a_scenario_without_steps_fail_them_all() -> None:
    broken = InvariantViolated("scenario gate: invariants broken while it ran", GATE.requirements)
    found = _decisions(ScenarioFailed(broken, "gate", Progress((ALLOCATED,), partial="so far")), probe=False)
    assert found == {**{r: ("fail", "") for r in ("RDY-1", "RDY-2")}, **{r: found[r] for r in ("RDY-3", "RDY-4")}}
    assert found["RDY-3"][0] == "skip"
    plain = Scenario("plain", "d", ("IMP-1", "IMP-2"), lambda ctx: None, "m")
    assert set(_decisions(ScenarioFailed(TIMEOUT, "plain"), sc=plain).values()) == {("fail", "")}


def test_owners_skipped_for_the_profile_hand_the_failure_on() -> None:
    """The step owes only RDY-4, which the profile cannot have judged: the failure goes to what lacks evidence."""
    sc = Scenario(
        "s",
        "d",
        ("RDY-1", "RDY-4"),
        lambda ctx: None,
        "m",
        readiness_for=("RDY-4",),
        steps=(Step(BOUND, owes=("RDY-4",)),),
    )
    found = _decisions(ScenarioFailed(TIMEOUT, "s"), probe=False, sc=sc)
    assert found["RDY-1"] == ("fail", "") and found["RDY-4"][0] == "skip"


def test_evidence_that_could_not_be_read_is_not_judged_saying_why() -> None:
    unread = Progress((ALLOCATED,), unread="what it had observed could not be read: OSError()")
    action, reason = _decisions(ScenarioFailed(TIMEOUT, "gate", unread))["RDY-1"]
    assert action == "not-judged" and reason.endswith("; what it had observed could not be read: OSError()")


def test_steps_name_only_the_scenarios_requirements() -> None:
    from conformance.suite.record import scenario

    with pytest.raises(ValueError, match="IMP-9"):
        scenario("bad", "d", ("IMP-1",), steps=(Step("x", evidence=("IMP-9",)),))


def test_a_must_not_judged_is_not_shown_to_pass() -> None:
    outcomes = Outcomes()
    for rid in ("RDY-1", "RDY-2"):
        outcomes.add(rid, RunResult(f"t::{rid}", "passed"))
    outcomes.add("RDY-3", RunResult("t::a", NOT_JUDGED, "gate failed before the pod bound (cause: x)"))
    outcomes.add("RDY-4", RunResult("t::b", "passed"))
    outcomes.add("RDY-4", RunResult("t::c", NOT_JUDGED, "gate failed before the pod bound (cause: x)"))
    summary = {k: v for k, v in outcomes.summary(model="node-local").items() if k.startswith("RDY-")}
    assert summary["RDY-3"]["outcome"] == NOT_JUDGED and summary["RDY-4"]["outcome"] == "partial"
    assert summary["RDY-4"]["reason"] == "c not judged: gate failed before the pod bound (cause: x)"
    verdict = judge({k: v for k, v in summary.items() if k in ("RDY-1", "RDY-2", "RDY-3", "RDY-4")}, "implementation")
    assert verdict.result == "partial"
    assert any(r.startswith("RDY-3 MUST not-judged: gate failed before the pod bound") for r in verdict.reasons)


_FAKE = """
import pytest

from conformance.cluster.waits import WaitTimeout
from conformance.suite.record import REGISTRY, Scenario, Step
from conformance.suite.runner import Progress, ScenarioFailed

STEPS = (
    Step("the first allocation", evidence=("RDY-1",), owes=("RDY-1",)),
    Step("the pod bound", evidence=("RDY-2", "RDY-3", "RDY-4"), owes=("RDY-2",)),
)
# Registered under a module no run collects, so the plugin starts no scenario (and no cluster) for it.
REGISTRY["fake-gate"] = Scenario(
    "fake-gate", "d", ("RDY-1", "RDY-2", "RDY-3", "RDY-4"), lambda ctx: None, "elsewhere",
    readiness_for=("RDY-3", "RDY-4"), steps=STEPS,
)


@pytest.fixture(scope="module")
def gate():
    yield ScenarioFailed(
        WaitTimeout("timed out after 27s waiting for the pod to be bound"),
        "fake-gate",
        Progress(("the first allocation",), partial={"allocations": 1}),
    )
    REGISTRY.pop("fake-gate")


@pytest.mark.requirement("RDY-1")
def test_rdy_1(gate):
    assert gate == {"allocations": 1}


@pytest.mark.requirement("RDY-2")
def test_rdy_2(gate):
    raise AssertionError("never reached: the failure is RDY-2's")


@pytest.mark.requirement("RDY-3")
def test_rdy_3(gate):
    raise AssertionError("never reached")


@pytest.mark.requirement("RDY-4")
def test_rdy_4(gate):
    raise AssertionError("never reached")
"""


@pytest.mark.parametrize("probe", [True, False], ids=["readiness-probe", "no-readiness-probe"])
def test_a_scenario_failing_midway_fails_only_its_own_requirement(
    pytester: pytest.Pytester, tmp_path: Path, probe: bool
) -> None:
    source = Path(__file__).resolve().parent.parent / "fixtures" / "profiles" / "reference-nodelocal.yaml"
    raw = yaml.safe_load(source.read_text())
    if not probe:
        raw.pop("readinessProbe")
    profile = pytester.path / "profile.yaml"
    profile.write_text(yaml.safe_dump(raw))
    pytester.makepyfile(test_fake=_FAKE)
    reports = tmp_path / "reports"
    result = pytester.runpytest("-p", "no:cacheprovider", "--profile", str(profile), f"--reports-dir={reports}")
    assert result.ret == 1
    requirements = yaml.safe_load((reports / "conformance-report.yaml").read_text())["requirements"]
    assert requirements["RDY-1"]["outcome"] == "passed"
    assert requirements["RDY-1"]["reason"].startswith("judged on what fake-gate observed up to the first allocation")
    assert requirements["RDY-2"]["outcome"] == "failed"
    assert requirements["RDY-2"]["reason"].startswith(
        "WaitTimeout: timed out after 27s waiting for the pod to be bound"
    )
    if probe:
        assert requirements["RDY-3"]["outcome"] == requirements["RDY-4"]["outcome"] == NOT_JUDGED
        cause, where = requirements["RDY-3"]["reason"].splitlines()
        assert cause == (
            "fake-gate failed before the pod bound (cause: WaitTimeout: timed out after 27s waiting for the pod to "
            "be bound)"
        )
        assert where == "(judged over the whole run's record, both implementation phases)", "its fixture names none"
        assert requirements["RDY-3"]["judgedIn"] == "whole-run"
        result.stdout.fnmatch_lines(["RDY-3 *MUST*not-judged*fake-gate failed before the pod bound*", "*2 not judged*"])
    else:  # as `profile check` predicts for a profile without a readiness probe
        assert requirements["RDY-3"]["outcome"] == requirements["RDY-4"]["outcome"] == "skipped"
        assert "no readinessProbe" in requirements["RDY-3"]["reason"]
