"""`-k`/`-m` narrow which scenarios start, not only which tests report: a scenario starts when a test left after
deselection reads it (its result fixture), or when it sits in such a test's module and no fixture hands it over
(pytester, in a subprocess so the scenarios it registers stay out of this process's registry; no cluster: the run
stops after collection)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

MODULE = """
import pytest
from conformance.suite.scenario import result_fixture, scenario

for name, req in (("sel-a", "SCH-1"), ("sel-b", "SCH-2"), ("sel-loose", "SCH-3")):
    scenario(name, name, (req,), implementation=False)(lambda ctx: None)

fa = result_fixture("fa", "sel-a")
fb = result_fixture("fb", "sel-b")


@pytest.mark.requirement("SCH-1")
def test_a(fa):
    pass


@pytest.mark.requirement("SCH-2")
def test_b(fb):
    pass
"""

OTHER = """
import pytest
from conformance.suite.scenario import result_fixture, scenario

scenario("sel-c", "sel-c", ("SCH-4",), implementation=False)(lambda ctx: None)

fa = result_fixture("fa", "sel-c")  # the same fixture name as test_sel's, another scenario
# sel-a handed over here too, by a fixture only read on demand (as test_running_settings reads binding-timeout's): on
# main, keyed by name, sel-a then counted as handed over but read by no test, and did not start
again = result_fixture("again", "sel-a")


@pytest.mark.requirement("SCH-4")
def test_c(fa):
    pass
"""

CONFTEST = """
import pytest
from conformance.session.shared import SELECTED_KEY


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    print("SELECTED", sorted(sc.name for sc in session.config.stash.get(SELECTED_KEY, [])))
"""


@pytest.mark.parametrize(
    ("args", "selected"),
    [
        ((), "['sel-a', 'sel-b', 'sel-loose']"),
        (("-k", "test_a"), "['sel-a', 'sel-loose']"),
        (("-k", "nothing_matches"), "[]"),
    ],
)
def test_deselection_narrows_the_scenarios_that_start(
    pytester: pytest.Pytester, args: tuple[str, ...], selected: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sel=MODULE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q", *args)
    result.stdout.fnmatch_lines([f"SELECTED {selected}"])


@pytest.mark.parametrize(
    ("args", "selected"),
    [((), "['sel-a', 'sel-b', 'sel-c', 'sel-loose']"), (("-k", "test_a"), "['sel-a', 'sel-loose']")],
)
def test_two_modules_with_a_fixture_of_the_same_name_start_each_its_own_scenario(
    pytester: pytest.Pytester, args: tuple[str, ...], selected: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sel=MODULE, test_sel2=OTHER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q", *args)
    result.stdout.fnmatch_lines([f"SELECTED {selected}"])
