"""The exit status tells the verdict, and the reports carry each failure's message (pytester: an in-process pytest
run of a tiny suite with requirement markers and no cluster; the plugin is the real one)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from conformance.report.catalogue import REQUIREMENTS
from conformance.report.verdict import EXIT_PARTIAL

pytest_plugins = ["pytester"]

_PASSING = """
import pytest

{tests}
"""


def _suite(pytester: pytest.Pytester, ids: list[str], failing: str | None = None, skipping: str | None = None) -> None:
    tests = []
    for rid in ids:
        body = "pass"
        if rid == failing:
            body = "observed = {'node': 'node-1'}\n    assert observed['node'] == 'node-2', f'pod bound on {observed}'"
        if rid == skipping:
            body = "pytest.skip('the profile declares no faultInjector')"
        name = rid.lower().replace("-", "_")
        tests.append(f"@pytest.mark.requirement({rid!r})\ndef test_{name}():\n    {body}\n")
    pytester.makepyfile(test_reqs=_PASSING.format(tests="\n".join(tests)))


CLUSTER = [r.id for r in REQUIREMENTS if r.area in ("baseline", "api", "scheduler")]
ALL = [r.id for r in REQUIREMENTS]


def test_every_requirement_passed_is_success(pytester: pytest.Pytester) -> None:
    _suite(pytester, ALL)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*cluster verdict: SUCCESS*",
            "*implementation verdict: SUCCESS*",
            "implementation: success (* not applicable) · cluster: success · exit 0",
        ]
    )


def test_a_subset_is_partial_and_exits_distinctly_unless_accepted(pytester: pytest.Pytester, tmp_path) -> None:
    _suite(pytester, CLUSTER[:3])
    result = pytester.runpytest("-p", "no:cacheprovider", f"--reports-dir={tmp_path}")
    assert result.ret == EXIT_PARTIAL
    result.stdout.fnmatch_lines(
        ["*NOT SHOWN TO PASS*", "*SCH-1, SCH-2*MUST not-covered*", f"exit status {EXIT_PARTIAL}*"]
    )
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    assert report["result"] == "partial" and report["verdicts"]["cluster"]["result"] == "partial"
    assert pytester.runpytest("-p", "no:cacheprovider", "--accept", "partial").ret == 0


def test_deselected_requirements_say_so(pytester: pytest.Pytester, tmp_path) -> None:
    _suite(pytester, CLUSTER)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "not api_2", f"--reports-dir={tmp_path}")
    assert result.ret == EXIT_PARTIAL
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    assert report["requirements"]["API-2"]["reason"].startswith("not selected in this run")


def test_profile_none_gives_the_cluster_verdict_and_says_the_implementation_was_not_certified(
    pytester: pytest.Pytester, tmp_path
) -> None:
    _suite(pytester, CLUSTER)
    result = pytester.runpytest("-p", "no:cacheprovider", "--profile", "none", f"--reports-dir={tmp_path}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*cluster verdict: SUCCESS*", "*implementation verdict: NOT-CERTIFIED*"])
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    assert report["verdicts"]["implementation"]["result"] == "not-certified"
    assert report["result"] == "success"


def test_a_failure_exits_1_and_every_report_carries_its_message(pytester: pytest.Pytester, tmp_path) -> None:
    _suite(pytester, ALL, failing="SCH-4", skipping="IMP-4")
    junit = tmp_path / "junit.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--reports-dir={tmp_path}", f"--junitxml={junit}")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["SCH-4 *failed*pod bound on {'node': 'node-1'}*", "IMP-4 *skipped*faultInjector*"])
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    reason = report["requirements"]["SCH-4"]["reason"]
    assert (
        reason.startswith("AssertionError: pod bound on {'node': 'node-1'}") and "assert 'node-1' == 'node-2'" in reason
    )
    assert report["verdicts"]["cluster"]["result"] == "failure"
    assert report["verdicts"]["implementation"]["result"] == "partial"
    cert = ET.parse(tmp_path / "certification-junit.xml").getroot()
    failure = next(c for c in cert.iter("testcase") if c.get("name").startswith("SCH-4")).find("failure")
    assert "pod bound on" in failure.get("message") and "node-2" in failure.text
    case = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "test_sch_4")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert "pod bound on" in props["failure_reason"]


def test_a_requirement_with_a_skipped_test_is_partial(pytester: pytest.Pytester, tmp_path) -> None:
    _suite(pytester, ALL)
    pytester.makepyfile(
        test_more="import pytest\n\n@pytest.mark.requirement('SCH-3')\ndef test_nominated():\n"
        "    pytest.skip('1.34 shows no nominatedNodeName')\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", f"--reports-dir={tmp_path}")
    assert result.ret == EXIT_PARTIAL
    entry = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())["requirements"]["SCH-3"]
    assert entry["outcome"] == "partial" and "test_nominated skipped: 1.34 shows" in entry["reason"]


def test_a_headline_ending_in_a_colon_keeps_its_first_item() -> None:
    from conformance.report.reasons import headline

    reason = "InvariantViolated: scenario s: invariants broken while it ran:\n  07:55:24.092 held-twice u-1: a, b\nmore"
    assert (
        headline(reason)
        == "InvariantViolated: scenario s: invariants broken while it ran: 07:55:24.092 held-twice u-1: a, b"
    )


def test_an_interrupt_a_library_wrapped_in_its_own_error_still_stops_the_run(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """pydantic (the kubernetes client's validators) turns a KeyboardInterrupt raised while it builds a schema into
    a SchemaError: the run must still stop as interrupted, and not report the wrapped error as a finding."""
    pytester.makepyfile(
        test_reqs="""
import os, signal, time
import pytest

@pytest.mark.requirement("API-1")
def test_api_1():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except KeyboardInterrupt as exc:
        raise RuntimeError(f"Error building validator: {exc!r}") from None

@pytest.mark.requirement("API-2")
def test_api_2():
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--reports-dir={tmp_path}")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.outlines[-20:]
    result.stderr.fnmatch_lines(["*interrupted (SIGTERM)*"])
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    outcomes = {rid: r["outcome"] for rid, r in report["requirements"].items()}
    assert outcomes["API-1"] == "not-covered" and outcomes["API-2"] == "not-covered", outcomes
    assert report["interrupted"] == "SIGTERM"
