"""The soak summary from run folders written here by hand (no cluster): failures per test and figure spreads."""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.report.soak import EXIT_STATUS, collect, lines, report


def _run(root: Path, run: str, profile: str, failed: bool, wall: float) -> None:
    folder = root / run / profile
    folder.mkdir(parents=True)
    failure = '<failure message="boom"/>' if failed else ""
    (folder / "junit.xml").write_text(
        '<testsuites><testsuite name="pytest">'
        f'<testcase classname="suite.test_a" name="test_one">{failure}</testcase>'
        '<testcase classname="suite.test_a" name="test_two"><skipped message="no"/></testcase>'
        "</testsuite></testsuites>"
    )
    report_doc = {
        "wallSeconds": wall,
        "cluster": {"bringUpSeconds": 3.0},
        "scenarios": {"scale": {"outcome": "passed", "seconds": wall - 10}},
        "measurements": {"detach_seconds": {"median": 12.0}},
    }
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump(report_doc))


def test_failures_are_counted_per_test_and_figures_spread(tmp_path: Path, capsys) -> None:
    _run(tmp_path, "1", "reference", failed=False, wall=50)
    _run(tmp_path, "2", "reference", failed=True, wall=70)
    _run(tmp_path, "3", "reference", failed=False, wall=60)
    soak = collect(tmp_path)
    assert soak.ran["reference: suite.test_a::test_one"] == 3
    assert soak.failed == {"reference: suite.test_a::test_one": ["2/reference"]}
    assert soak.figures["reference: wall s"] == [50, 70, 60]
    text = "\n".join(lines(soak))
    assert "1/3  reference: suite.test_a::test_one  [2/reference]" in text
    assert "50.00    60.00    70.00  n=3" in text
    assert report(tmp_path) == 1


def test_a_run_without_reports_fails_the_soak(tmp_path: Path) -> None:
    _run(tmp_path, "1", "reference", failed=False, wall=50)
    (tmp_path / "2" / "reference").mkdir(parents=True)
    soak = collect(tmp_path)
    assert soak.missing == [tmp_path / "2" / "reference"] and not soak.failed
    assert "NO REPORT" in "\n".join(lines(soak))
    assert report(tmp_path) == 1


def test_a_clean_soak_exits_zero(tmp_path: Path) -> None:
    _run(tmp_path, "1", "reference", failed=False, wall=50)
    assert report(tmp_path) == 0


def test_a_run_that_exited_non_zero_without_a_failed_test_fails_the_soak(tmp_path: Path) -> None:
    """A leftover, an unaccepted verdict or no test run exits non-zero with every test passed or skipped."""
    _run(tmp_path, "1", "reference", failed=False, wall=50)
    _run(tmp_path, "2", "reference", failed=False, wall=50)
    (tmp_path / "1" / "reference" / EXIT_STATUS).write_text("0\n")
    (tmp_path / "2" / "reference" / EXIT_STATUS).write_text("1\n")
    soak = collect(tmp_path)
    assert soak.exits == {"2/reference": 1} and not soak.failed
    assert "EXIT 1: 2/reference" in "\n".join(lines(soak))
    assert report(tmp_path) == 1


def test_an_unreadable_exit_status_counts_as_failed(tmp_path: Path) -> None:
    _run(tmp_path, "1", "reference", failed=False, wall=50)
    (tmp_path / "1" / "reference" / EXIT_STATUS).write_text("")
    assert collect(tmp_path).exits == {"1/reference": -1}


def test_a_known_defect_failure_is_told_apart_and_does_not_fail_the_soak(tmp_path: Path) -> None:
    """SCH-9 fails in every run on 1.37.2 (an accepted known upstream defect): the soak counts it apart."""
    _run(tmp_path, "1", "reference", failed=False, wall=50)
    junit = tmp_path / "1" / "reference" / "junit.xml"
    junit.write_text(
        junit.read_text().replace(
            '<testcase classname="suite.test_a" name="test_one">',
            '<testcase classname="suite.test_a" name="test_one"><properties>'
            '<property name="known_defect" value="double-allocation-after-binding-timeout"/></properties>'
            '<failure message="held twice"/>',
        )
    )
    (tmp_path / "1" / "reference" / EXIT_STATUS).write_text("0\n")
    soak = collect(tmp_path)
    assert not soak.failed and soak.known == {"reference: suite.test_a::test_one": ["1/reference"]}
    assert "failures on known upstream defects" in "\n".join(lines(soak))
    assert report(tmp_path) == 0


def test_shards_merge_into_one_summary_with_runs_per_profile(tmp_path: Path) -> None:
    """`make soak` side by side with its own REPORTS each: one summary, a run named by its shard."""
    _run(tmp_path / "a", "1", "reference", failed=False, wall=50)
    _run(tmp_path / "a", "2", "reference", failed=False, wall=52)
    _run(tmp_path / "b", "1", "reference-counted", failed=True, wall=90)
    (tmp_path / "b" / "1" / "reference-counted" / EXIT_STATUS).write_text("1\n")
    soak = collect(tmp_path / "a", tmp_path / "b")
    assert soak.per_profile == {"reference": [2, 2], "reference-counted": [1, 0]}
    assert soak.failed == {"reference-counted: suite.test_a::test_one": ["b:1/reference-counted"]}
    assert soak.exits == {"b:1/reference-counted": 1}
    text = "\n".join(lines(soak))
    assert "  reference: 2 runs, 2 exited 0 with their reports" in text
    assert "  reference-counted: 1 runs, 0 exited 0 with their reports" in text
    assert report(tmp_path / "a", tmp_path / "b") == 1
