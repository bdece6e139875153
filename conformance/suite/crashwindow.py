"""An implementation requirement is not judged on a scenario the control plane crashed under (SCH-11).

A kube-scheduler that panics while a scenario waits in PreBind loses what it was doing: seen in a soak (1.37.2,
reschedule-to-local, 2026-12-07), the scheduler died 2 s after the controller set the shared claim's reschedule
condition; the restarted one never reallocated the claim, and IMP-20 failed the controller for a step the scheduler
owed. The crash is the cluster's finding (SCH-11 fails with it); an implementation test whose scenario was running
when a component crashed and that then failed is "not judged", its first line the crash, its own failure after it,
so a correct stack is not failed for the cluster's crash and the run says what it could not check (partial).
A test that passed is kept: it observed the behaviour. Cluster requirements (API-*, SCH-*) keep their failures: the
crash is their subject's own. Run-wide judgements (no scenario of their own) keep theirs too: their window is the
whole run, and a crash must not excuse what the rest of the run showed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pytest

from conformance.cluster.providers.base import Crash
from conformance.report.catalogue import CATALOGUE
from conformance.report.outcomes import NOT_JUDGED_PREFIX
from conformance.report.reasons import exception_reason, headline
from conformance.report.verdict import NOT_JUDGED, subject_of
from conformance.suite.phases import scenarios_read
from conformance.suite.runner import ScenarioRunner


def scenarios_of(item: pytest.Item) -> set[str]:
    """The scenarios whose observations the test reads (its module's result fixtures it uses)."""
    module = getattr(getattr(item, "module", None), "__name__", "")
    return scenarios_read(module, getattr(item, "fixturenames", ()))


def crashes_during(
    scenarios: Iterable[str], runners: Iterable[ScenarioRunner], crashes: list[Crash]
) -> list[tuple[str, Crash]]:
    """(scenario, crash) for each crash seen while one of these scenarios ran (start to end, or to now)."""
    found = []
    for runner in runners:
        for name in sorted(scenarios):
            timing = runner.timings.get(name)
            if timing is None:
                continue
            end = timing.end if timing.end is not None else time.time()
            found += [(name, c) for c in crashes if timing.start <= c.at <= end]
    return found


def not_judged_if_crashed(
    item: pytest.Item,
    error: BaseException,
    runners: Iterable[ScenarioRunner],
    crashes: Callable[[], list[Crash] | None] | None,
) -> None:
    """Raise the not-judged skip when `error` failed an implementation test whose scenario ran through a crash."""
    marker = item.get_closest_marker("requirement")
    if marker is None or crashes is None or marker.args[0] not in CATALOGUE:
        return
    if subject_of(marker.args[0]) != "implementation":
        return
    if item.get_closest_marker("run_wide") is not None or not (names := scenarios_of(item)):
        return
    try:
        seen = crashes() or []
    except Exception:  # the watch cannot answer now (an API error at the end): the failure stands as it is
        return
    hits = crashes_during(names, runners, seen) if seen else []
    if not hits:
        return
    scenario, crash = hits[0]
    when = time.strftime("%H:%M:%S", time.gmtime(crash.at))
    item.user_properties.append(("outcome", NOT_JUDGED))
    pytest.skip(
        f"{NOT_JUDGED_PREFIX}{crash.component} crashed at {when} UTC while {scenario} ran (SCH-11: {crash.cause}); "
        f"what the scenario then saw is not the implementation's to answer for. Its failure: "
        f"{headline(exception_reason(error))}"
    )
