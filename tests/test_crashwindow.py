"""suite/crashwindow.py: an implementation test that failed on a scenario the control plane crashed under is not
judged; everything else keeps its outcome. The test item and the runner are stand-ins (no cluster): only what the rule
reads of them (markers, module, fixtures; the scenarios' start and end)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from conformance.cluster.providers.base import Crash
from conformance.report.outcomes import NOT_JUDGED_PREFIX
from conformance.report.verdict import NOT_JUDGED
from conformance.suite.crashwindow import crashes_during, not_judged_if_crashed
from conformance.suite.phases import FIXTURES
from conformance.suite.runner import Timing

pytest_plugins = ["pytester"]

MODULE = "tests.stand_in_module"


def _crash(at: float) -> Crash:
    cause = "panic: runtime error: index out of range [1] with length 1"
    return Crash("kube-scheduler", at, cause, "tracker.syncSlice", "kube-scheduler.log", restarted=True)


class Item:
    def __init__(self, requirement: str, *, run_wide: bool = False) -> None:
        self.marks = {"requirement": pytest.mark.requirement(requirement).mark}
        if run_wide:
            self.marks["run_wide"] = pytest.mark.run_wide.mark
        self.module = SimpleNamespace(__name__=MODULE)
        self.fixturenames = ["shared", "cluster"]
        self.user_properties: list[tuple[str, Any]] = []

    def get_closest_marker(self, name: str) -> Any:
        return self.marks.get(name)


@pytest.fixture
def runners() -> Iterator[list[Any]]:
    FIXTURES[(MODULE, "shared")] = ("shared-claim-attach",)
    yield [SimpleNamespace(timings={"shared-claim-attach": Timing(100.0, 300.0), "other": Timing(0.0, 1000.0)})]
    del FIXTURES[(MODULE, "shared")]


def test_only_crashes_inside_the_scenarios_window_count(runners: list[Any]) -> None:
    inside, before, after = _crash(150.0), _crash(99.0), _crash(301.0)
    assert crashes_during({"shared-claim-attach"}, runners, [before, inside, after]) == [
        ("shared-claim-attach", inside)
    ]


def test_an_implementation_failure_under_a_crash_is_not_judged_with_the_crash_first(runners: list[Any]) -> None:
    item = Item("IMP-20")
    with pytest.raises(pytest.skip.Exception) as skipped:
        not_judged_if_crashed(item, AssertionError("binding condition never written"), runners, lambda: [_crash(150.0)])
    reason = str(skipped.value)
    assert reason.startswith(f"{NOT_JUDGED_PREFIX}kube-scheduler crashed at 00:02:30 UTC while shared-claim-attach ran")
    assert "(SCH-11: panic: runtime error: index out of range [1] with length 1)" in reason
    assert reason.endswith("binding condition never written")
    assert ("outcome", NOT_JUDGED) in item.user_properties


@pytest.mark.parametrize(
    ("item", "crashes"),
    [
        (Item("IMP-20"), [_crash(350.0)]),  # the crash came after the scenario ended
        (Item("IMP-20"), []),  # no crash
        (Item("SCH-5"), [_crash(150.0)]),  # a cluster requirement: the crash is its subject's own
        (Item("IMP-12", run_wide=True), [_crash(150.0)]),  # judged over the whole run
    ],
)
def test_every_other_failure_stays_a_failure(runners: list[Any], item: Item, crashes: list[Crash]) -> None:
    not_judged_if_crashed(item, AssertionError("boom"), runners, lambda: crashes)
    not_judged_if_crashed(item, AssertionError("boom"), runners, None)  # a provider that watches nothing
    assert item.user_properties == []


_FAKE = """
import time
from types import SimpleNamespace

import pytest

from conformance.cluster.providers.base import Crash
from conformance.session.shared import CRASHES_KEY, RUNNER_KEY
from conformance.suite.phases import FIXTURES
from conformance.suite.runner import Timing

FIXTURES[(__name__, "shared")] = ("fake-shared",)


@pytest.fixture(scope="module")
def shared(request):
    now, stash = time.time(), request.config.stash
    cause = "panic: runtime error: index out of range [1] with length 1"
    crash = Crash("kube-scheduler", now, cause, "tracker.syncSlice", "kube-scheduler.log", restarted=True)
    stash[CRASHES_KEY] = lambda: [crash]
    stash[RUNNER_KEY] = SimpleNamespace(timings={"fake-shared": Timing(now - 10, now + 10)})
    yield "observed"
    del stash[RUNNER_KEY]


@pytest.mark.requirement("IMP-20")
def test_under_the_crash(shared):
    raise AssertionError("the pods of the shared claim never bound")


@pytest.mark.requirement("IMP-1")
def test_reading_no_scenario():
    raise AssertionError("its own failure")
"""


def test_the_plugin_calls_the_rule_around_every_test(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The rule wired into a whole pytest run (pytester, in-process, the real plugin; no cluster): a wrapper of
    pytest_pyfunc_call registered under another function name is never called by pytest, which is how the rule
    went unused in real runs until a soak showed IMP-20 failed under a kube-scheduler panic."""
    profile = Path(__file__).resolve().parent.parent / "fixtures" / "profiles" / "reference.yaml"
    pytester.makepyfile(test_fake=_FAKE)
    reports = tmp_path / "reports"
    result = pytester.runpytest("-p", "no:cacheprovider", "--profile", str(profile), f"--reports-dir={reports}")
    requirements = yaml.safe_load((reports / "conformance-report.yaml").read_text())["requirements"]
    assert requirements["IMP-20"]["outcome"] == NOT_JUDGED
    assert requirements["IMP-20"]["reason"].startswith("kube-scheduler crashed at ")
    assert "the pods of the shared claim never bound" in requirements["IMP-20"]["reason"]
    assert requirements["IMP-1"]["outcome"] == "failed", "a test that reads no scenario keeps its failure"
    assert result.ret == 1
