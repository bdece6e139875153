"""Known upstream defects: the catalogue, the symptom match over hand-made claim records (no apiserver), and how a
run that hits one reports and exits (pytester: an in-process pytest run of a tiny suite with the real plugin)."""

from __future__ import annotations

import fnmatch
import itertools
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.defects import HOLDER_PAST_TIMEOUT, accepted, catalogue, known_defect
from conformance.cluster.providers.base import ClusterInfo
from conformance.cluster.toolchain.source import with_patches
from conformance.observe.allocations import judge, past_binding_timeout
from conformance.observe.recorder import Record
from conformance.report.catalogue import SUITE_REQUIREMENTS
from conformance.report.verdict import EXIT_FAILURE, EXIT_KNOWN_DEFECT, EXIT_PARTIAL
from conformance.suite.known import describe, explain

pytest_plugins = ["pytester"]
DEFECT = "double-allocation-after-binding-timeout"
_SEQ = itertools.count()


def _claim(name: str, rev: int, at: float, device: str | None, conditions: dict[str, str] | None = None) -> Record:
    """A claim write: allocated `device` (binding condition c.example.com/attached, failure .../failed) or none."""
    status: dict[str, Any] = {}
    if device is not None:
        result = {
            "driver": "c.example.com",
            "pool": "fabric",
            "device": device,
            "request": "r",
            "bindingConditions": ["c.example.com/attached"],
            "bindingFailureConditions": ["c.example.com/failed"],
        }
        status["allocation"] = {"devices": {"results": [result]}}
        if conditions:
            found = [{"type": t, "status": s} for t, s in conditions.items()]
            status["devices"] = [{"driver": "c.example.com", "pool": "fabric", "device": device, "conditions": found}]
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "status": status}
    return Record(next(_SEQ), at, "claim", "MODIFIED", "ns", name, rev, obj)


def _info(version: str, timeout: int = 20) -> ClusterInfo:
    return ClusterInfo("c", "local", Path("/dev/null"), version, {}, timeout, True, [])


# a held dev-0 from revision 10 (t=100 s) to 30 (t=122.1 s); b was allocated dev-0 at revision 25, t=120.05 s
TIMED_OUT = [_claim("a", 10, 100.0, "dev-0"), _claim("b", 25, 120.05, "dev-0"), _claim("a", 30, 122.1, None)]


def test_the_catalogue_names_releases_by_minor_or_exact_version_and_reads_server_versions() -> None:
    defect = catalogue()[DEFECT]
    assert defect.requirement == "SCH-9" and Path(defect.writeup).name.endswith(".md")
    assert all(defect.covers(v) for v in ("v1.37.2", "1.37.0", "v1.37.2-gke.100"))
    assert not any(defect.covers(v) for v in ("v1.36.3", "v1.34.4", "v1.38.0-beta.0", "v1.38.0", "not a version"))
    assert known_defect("SCH-9", HOLDER_PAST_TIMEOUT, "v1.37.2") == defect
    assert known_defect("SCH-9", HOLDER_PAST_TIMEOUT, "v1.36.3") is None
    assert known_defect("SCH-3", HOLDER_PAST_TIMEOUT, "v1.37.2") is None


def test_accepting_an_unknown_defect_is_an_error_not_a_silent_no_op() -> None:
    assert accepted(["partial", f"known-defect:{DEFECT}"]) == {DEFECT}
    with pytest.raises(ValueError, match="unknown known defect"):
        accepted(["known-defect:no-such-defect"])


def test_the_overlap_is_measured_in_revisions_and_milliseconds() -> None:
    [double] = judge(TIMED_OUT).doubles
    assert (double.revisions, round(double.seconds * 1000)) == (5, 2050)
    assert "until revision 30: 5 revisions, 2050 ms" in str(double)


def test_the_symptom_is_a_holder_still_pending_a_binding_timeout_after_its_allocation() -> None:
    doubles = judge(TIMED_OUT).doubles
    assert past_binding_timeout(TIMED_OUT, doubles, 20) == doubles
    assert past_binding_timeout(TIMED_OUT, doubles, 30) == [], "allocated again before the timeout: not the symptom"
    ready = [*TIMED_OUT[:1], _claim("a", 20, 110.0, "dev-0", {"c.example.com/attached": "True"}), *TIMED_OUT[1:]]
    assert past_binding_timeout(ready, judge(ready).doubles, 20) == [], "a holder whose conditions were all True"
    failed = [*TIMED_OUT[:1], _claim("a", 20, 110.0, "dev-0", {"c.example.com/failed": "True"}), *TIMED_OUT[1:]]
    assert past_binding_timeout(failed, judge(failed).doubles, 20) == [], "a failed holder did not time out"


def test_a_failure_is_named_a_known_defect_only_if_every_double_is_its_symptom_on_a_listed_release() -> None:
    doubles = judge(TIMED_OUT).doubles
    named = explain(doubles, TIMED_OUT, _info("v1.37.2"))
    assert named.defect is not None and named.defect.id == DEFECT and not named.unexplained
    assert describe(doubles, named).startswith(f"known upstream defect: {DEFECT}")
    assert explain(doubles, TIMED_OUT, _info("v1.36.3")).defect is None, "a release the defect is not listed for"
    patched = replace(_info("v1.37.2"), source=with_patches("v1.37.2", Path(__file__)))
    assert explain(doubles, TIMED_OUT, patched).defect is None, "a patched control plane is not the release"
    early = [_claim("c", 40, 200.0, "dev-1"), _claim("d", 41, 201.0, "dev-1")]  # no timeout: a new failure
    mixed = judge(TIMED_OUT + early).doubles
    found = explain(mixed, TIMED_OUT + early, _info("v1.37.2"))
    assert found.defect is None and [d.second.claim for d in found.unexplained] == ["ns/d"]
    text = describe(mixed, found)
    assert text.startswith("1 of the 2 double allocations are not") and "[not a known defect's symptom]" in text


_SUITE = """
import pytest

{tests}
"""


def _suite(pytester: pytest.Pytester, ids: list[str], known: dict[str, str], failing: tuple[str, ...] = ()) -> None:
    """One test per requirement; those in `known` fail naming that defect, those in `failing` fail plainly."""
    tests = []
    for rid in ids:
        body = "pass"
        if rid in known:
            body = f"record_property('known_defect', {known[rid]!r})\n    pytest.fail('known upstream defect: seen')"
        elif rid in failing:
            body = "assert False, 'a new failure'"
        name = rid.lower().replace("-", "_")
        tests.append(f"@pytest.mark.requirement({rid!r})\ndef test_{name}(record_property):\n    {body}\n")
    pytester.makepyfile(test_reqs=_SUITE.format(tests="\n".join(tests)))


ALL = [r.id for r in SUITE_REQUIREMENTS]


def test_a_run_failed_only_by_a_known_defect_stays_a_failure_and_exits_distinctly(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    _suite(pytester, ALL, {"SCH-9": DEFECT})
    result = pytester.runpytest("-p", "no:cacheprovider", f"--reports-dir={tmp_path}")
    assert result.ret == EXIT_KNOWN_DEFECT
    result.stdout.fnmatch_lines(
        [
            f"SCH-9 * MUST   failed (known upstream defect: {DEFECT})*",
            "*KNOWN UPSTREAM DEFECTS*",
            f"{DEFECT}: SCH-9 failed; not accepted*",
            "*cluster verdict: FAILURE*",
            f"*SCH-9 MUST failed (known upstream defect: {DEFECT})*",
            f"exit status {EXIT_KNOWN_DEFECT}*not accepted: {DEFECT}*",
        ]
    )
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    assert report["result"] == "failure" and report["verdicts"]["cluster"]["result"] == "failure"
    assert report["requirements"]["SCH-9"]["outcome"] == "failed"
    assert report["requirements"]["SCH-9"]["knownDefects"] == [DEFECT]
    [entry] = report["knownDefects"]
    assert entry["id"] == DEFECT and entry["requirements"] == ["SCH-9"] and entry["accepted"] is False
    assert "Known upstream defects" in (tmp_path / "report.html").read_text()


def test_accepting_the_known_defect_exits_as_the_rest_of_the_run_and_every_report_says_accepted(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    _suite(pytester, ALL, {"SCH-9": DEFECT})
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--reports-dir={tmp_path}", f"--accept=known-defect:{DEFECT}"
    )
    assert result.ret == 0
    headline = "implementation: success (* not applicable) · cluster: failure, only known upstream defect SCH-9 " + (
        "(accepted) · exit 0"
    )
    result.stdout.fnmatch_lines(
        [f"{DEFECT}: SCH-9 failed; ACCEPTED*", "*cluster verdict: FAILURE*", "*accepted known*", headline]
    )
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    assert report["result"] == "failure" and report["knownDefects"][0]["accepted"] is True
    assert report["exitStatus"] == 0 and fnmatch.fnmatch(report["headline"], headline)
    page = (tmp_path / "report.html").read_text()
    assert "exit status <b>0</b>" in page and "only known upstream defect SCH-9 (accepted) · exit 0" in page
    copy = report["knownDefects"][0]["writeupCopy"]
    assert (tmp_path / copy).is_file() and f'<a href="{copy}">' in page  # the write-up, linked and bundled
    junit = ET.parse(tmp_path / "certification-junit.xml").getroot()
    [case] = [c for c in junit.iter("testcase") if c.get("name", "").startswith("SCH-9 ")]
    failure = case.find("failure")
    assert failure is not None and f"accepted: {DEFECT}" in (failure.get("message") or "")


def test_accepted_known_defects_leave_the_rest_partial_when_it_is(pytester: pytest.Pytester) -> None:
    cluster = [r.id for r in SUITE_REQUIREMENTS if r.area in ("baseline", "api", "scheduler")]
    _suite(pytester, cluster, {"SCH-9": DEFECT})
    accept = f"--accept=known-defect:{DEFECT}"
    assert pytester.runpytest("-p", "no:cacheprovider", accept).ret == EXIT_PARTIAL
    assert pytester.runpytest("-p", "no:cacheprovider", accept, "--accept=partial").ret == 0


def test_another_failure_beside_an_accepted_known_defect_fails_the_run(pytester: pytest.Pytester) -> None:
    _suite(pytester, ALL, {"SCH-9": DEFECT}, failing=("SCH-3",))
    result = pytester.runpytest("-p", "no:cacheprovider", f"--accept=known-defect:{DEFECT}")
    assert result.ret == EXIT_FAILURE
    result.stdout.fnmatch_lines(["SCH-3 * MUST   failed *"])


def test_one_test_of_a_requirement_failing_without_the_defect_makes_it_a_plain_failure(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_reqs="""
import pytest

@pytest.mark.requirement("SCH-9")
def test_known(record_property):
    record_property("known_defect", "double-allocation-after-binding-timeout")
    pytest.fail("known")

@pytest.mark.requirement("SCH-9")
def test_new():
    assert False, "a double allocation that is no known defect's symptom"
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", f"--accept=known-defect:{DEFECT}", "--accept=partial")
    assert result.ret == EXIT_FAILURE
    result.stdout.fnmatch_lines(["SCH-9 * MUST   failed  *"])


def test_an_unknown_accepted_defect_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _suite(pytester, ["SCH-9"], {})
    result = pytester.runpytest("-p", "no:cacheprovider", "--accept=known-defect:nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert pytester.runpytest("-p", "no:cacheprovider", "--accept=everything").ret == pytest.ExitCode.USAGE_ERROR


def test_an_observed_upstream_behaviour_is_listed_and_fails_nothing() -> None:
    from conformance.cluster.defects import RELEASED_BEFORE_UNPREPARE
    from conformance.report.outcomes import Outcomes, RunResult
    from conformance.report.verdict import known_defects

    behaviour = catalogue()["force-delete-frees-device-before-unprepare"]
    assert not behaviour.fails and behaviour.requirement == "NODE-4"
    assert known_defect("NODE-4", RELEASED_BEFORE_UNPREPARE, "v1.37.2") == behaviour
    outcomes = Outcomes()
    outcomes.add("NODE-4", RunResult("t::node4", "passed", "seen", known_defect=behaviour.id))
    entry = outcomes.summary()["NODE-4"]
    assert entry["outcome"] == "passed" and entry["observedDefects"] == [behaviour.id]
    assert "knownDefects" not in entry and known_defects({"NODE-4": entry}) == {}  # no failure, no exit 7
