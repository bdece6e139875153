"""What a test of a failed scenario gets: the scenario's partial observation to judge, the scenario's error (the
failure is its requirement's), "not judged" (its evidence is missing), or a skip (the profile cannot have it judged).

The rule, per requirement of the scenario (docs/reports.md, "A failed scenario's requirements"):
1. one the profile cannot have judged (no readiness probe, no fabric probe: gaps.profile_gap with Scenario.probe_for,
   readiness_for) is skipped, whatever the scenario did, as `profile check` predicts;
2. the failure belongs to the requirements the error names (InvariantViolated: every one of the scenario), else to
   those the step it failed on owes (Step.owes: the wait that ran out was for their behaviour), else to every
   requirement whose evidence is missing, else to all (a scenario without steps: all of them, as before); skipped
   requirements are left out, and where that leaves none the next of these takes it. They fail with the error;
3. any other requirement whose evidence step the scenario reached is judged on what it had observed by then;
4. the rest are not judged: "<scenario> failed before <its step> (cause: <first line of the error>)", counted as not
   shown to pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import pytest

from conformance.implementation.profile import Profile
from conformance.report.outcomes import NOT_JUDGED_PREFIX, NOTE_PROPERTY
from conformance.report.reasons import exception_reason, headline
from conformance.report.verdict import NOT_JUDGED
from conformance.suite.gaps import profile_gap
from conformance.suite.record import REGISTRY, Scenario, Step
from conformance.suite.runner import ScenarioFailed

Action = Literal["skip", "fail", "not-judged", "judge"]
_ORDER: tuple[Action, ...] = ("skip", "fail", "not-judged", "judge")  # of a test fed by several failed scenarios


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str = ""  # skip: the gap; not-judged: why; judge: the note a passed check carries


def failed_step(sc: Scenario, reached: tuple[str, ...]) -> Step | None:
    """The step the scenario was on its way to when it failed (None: past its last declared step)."""
    return next((s for s in sc.steps if s.name not in reached), None)


def owners(sc: Scenario, failed: ScenarioFailed, gapped: set[str]) -> tuple[str, ...]:
    """The requirements the scenario's failure belongs to (rule 2)."""
    reached = failed.progress.reached
    step = failed_step(sc, reached)
    missing = tuple(r for r in sc.requirements if sc.evidence_step(r) not in reached)
    named: tuple[str, ...] = tuple(getattr(failed.error, "requirements", ()) or ())
    for candidates in (named, step.owes if step else (), missing, sc.requirements):
        if left := tuple(r for r in candidates if r not in gapped):
            return left
    return ()


def cause(failed: ScenarioFailed) -> str:
    """The first line of the scenario's error, as every not-judged reason quotes it."""
    return headline(exception_reason(failed.error))


def decide(sc: Scenario, failed: ScenarioFailed, requirement: str, profile: Profile | None) -> Decision:
    """What the test of `requirement` makes of scenario `sc`'s failure (the module's rule)."""
    gaps = {r: gap for r in sc.requirements if profile is not None and (gap := profile_gap(sc, profile, r))}
    if requirement in gaps:
        return Decision("skip", gaps[requirement])
    if requirement in owners(sc, failed, set(gaps)):
        return Decision("fail")
    step, progress = sc.evidence_step(requirement), failed.progress
    if step in progress.reached and not progress.unread:
        return Decision("judge", f"judged on what {sc.name} observed up to {step}; it failed later ({cause(failed)})")
    unread = f"; {progress.unread}" if step in progress.reached else ""
    return Decision("not-judged", f"{sc.name} failed before {step} (cause: {cause(failed)}){unread}")


def hand_over(item: pytest.Function, profile: Profile | None) -> None:
    """In a test's call: each failed scenario it reads (ScenarioFailed arguments) decided for its requirement. The
    test then runs on the partial observations, or skips, fails with the error, or ends not judged."""
    __tracebackhide__ = True  # a failure shows the scenario's error, not this hand-over
    failed = {k: v for k, v in item.funcargs.items() if isinstance(v, ScenarioFailed)}
    if not failed:
        return
    marker = item.get_closest_marker("requirement")
    if marker is None or any(f.scenario not in REGISTRY for f in failed.values()):
        raise next(iter(failed.values())).error  # a test of no requirement: the scenario's error, as it is
    decided = {k: decide(REGISTRY[f.scenario], f, marker.args[0], profile) for k, f in failed.items()}
    key, worst = min(decided.items(), key=lambda kv: _ORDER.index(kv[1].action))
    if worst.action == "skip":
        pytest.skip(worst.reason)
    if worst.action == "fail":
        raise failed[key].error
    if worst.action == "not-judged":
        item.user_properties.append(("outcome", NOT_JUDGED))  # pytest's terminal and JUnit say so, too
        pytest.skip(NOT_JUDGED_PREFIX + worst.reason)
    for key, decision in decided.items():
        item.funcargs[key] = failed[key].progress.partial
        item.user_properties.append((NOTE_PROPERTY, decision.reason))


def nothing_judged(what: str, failed: dict[str, str], record_property: Callable[[str, Any], None]) -> NoReturn:
    """A run-wide rule that found nothing to judge: not judged, with the cause, where implementation scenarios failed
    before they could show it (`failed`: scenario -> its first line, ScenarioRunner.failures); else a skip saying
    what was missing."""
    __tracebackhide__ = True
    if not failed:
        raise pytest.skip.Exception(what, _use_item_location=True)  # reported at the test, not here
    causes = "; ".join(f"{name}: {first}" for name, first in sorted(failed.items())[:5])
    record_property("outcome", NOT_JUDGED)
    raise pytest.skip.Exception(
        f"{NOT_JUDGED_PREFIX}{what}; {len(failed)} implementation scenarios failed before they could show it "
        f"({causes}{'; ...' if len(failed) > 5 else ''})",
        _use_item_location=True,
    )
