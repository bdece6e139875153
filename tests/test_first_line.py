"""Every channel carries the same first line of a failure (report/reasons.py headline owns it): pytest's JUnit,
the certification JUnit, report.html and the terminal. A whole pytest run of a fake failed scenario (pytester,
in-process, the real plugin; no cluster), its first line longer than the cut and ending in ":"."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from selftest.suite_runner import bare_wait_timeouts

from conformance.report.reasons import FIRST_LINE_CHARS, headline

pytest_plugins = ["pytester"]

CAUSE = "claim ns/app-gpu-1 allocated 3 times on node-1, each cleared by the binding timeout after 20.3 s; " + (
    "x" * FIRST_LINE_CHARS
)
EARLY = "f1: ready True while the fabric says None"
_FAKE = f"""
import pytest

from conformance.suite.record import REGISTRY, Scenario
from conformance.suite.runner import Progress, ScenarioFailed

REGISTRY["fake-flow"] = Scenario("fake-flow", "d", ("IMP-2",), lambda ctx: None, "elsewhere")


@pytest.fixture(scope="module")
def flow():
    error = AssertionError("{CAUSE}\\nthe wait that ran out: timed out after 60s waiting for x")
    yield ScenarioFailed(error, "fake-flow")
    REGISTRY.pop("fake-flow")


@pytest.mark.requirement("IMP-2")
def test_imp_2(flow):
    raise AssertionError("never reached: the failure is IMP-2's")


@pytest.mark.requirement("IMP-1")
def test_imp_1():
    pytest.skip("timed out after 30s waiting for the pools to be published\\nlast seen: nothing observed")


@pytest.mark.requirement("IMP-3")
def test_imp_3():
    raise AssertionError("the list of early conditions:\\n  {EARLY}")
"""


def _messages(path: Path, tag: str) -> dict[str, str]:
    return {
        str(case.get("name")): str(found.get("message"))
        for case in ET.parse(path).getroot().iter("testcase")
        for found in case.iter(tag)
    }


def test_junit_html_and_terminal_carry_the_same_first_line(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_fake=_FAKE)
    reports, junit = tmp_path / "reports", tmp_path / "junit.xml"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--profile", "none", f"--reports-dir={reports}", f"--junitxml={junit}"
    )
    requirements = yaml.safe_load((reports / "conformance-report.yaml").read_text())["requirements"]
    page = (reports / "report.html").read_text()
    terminal = result.stdout.str()
    pytest_junit = _messages(junit, "failure")
    certification = _messages(reports / "certification-junit.xml", "failure")
    for rid, test, first in (
        ("IMP-2", "test_imp_2", headline(f"AssertionError: {CAUSE}")),
        (
            "IMP-3",
            "test_imp_3",
            "AssertionError: the list of early conditions: f1: ready True while the fabric says None",
        ),
    ):
        assert headline(requirements[rid]["reason"]) == first
        assert len(first) <= FIRST_LINE_CHARS
        assert pytest_junit[test] == first, "pytest's JUnit message"
        assert next(m for name, m in certification.items() if name.startswith(f"{rid} ")) == first
        assert f'class="first">{html.escape(first)}</' in page, "report.html"
        assert any(line.startswith(rid) and line.endswith(first) for line in terminal.splitlines()), "terminal"
    assert bare_wait_timeouts(junit) == ["test_imp_1: timed out after 30s waiting for the pools to be published"], (
        "what every selftest variant's run is checked for (suite_runner.run_suite)"
    )
