"""GA-3 ("scalability verified in clusters of 5000+ nodes") answered in the enhancement review from the figures of
`make scale` (conformance/report/scale_evidence.py), per release, with kube-scheduler's double allocations apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from test_review import _bundles

from conformance.cli import main
from conformance.report.review import ANSWERED, FAILED, NOT_ANSWERED, PARTLY, Review
from conformance.report.scale_evidence import line

WAIT = "scheduler_dra_bindingconditions_wait_duration_seconds"


def _point(nodes: int, violations: int = 0, doubles: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "date": "2026-12-07 01:00 UTC",
        "kubernetes": "1.37.2",
        "machine": "2 CPUs, 24 GiB, x86_64",
        "nodes": nodes,
        "pods": 1000,
        "load1mAtStart": 3.1,
        "load1mAtEnd": 4.2,
        "bringUp": {"seconds": 40.5},
        "waves": {
            "withoutConditions": {"podsBoundPerSecond": 50.0},
            "withConditions": {
                "podsAllocatedPerSecond": 30.0,
                "peakWaiting": 1000,
                "scheduler": {"bindingConditions": {WAIT: {"success": {"count": 1000, "p50": 12.0, "p99": 30.0}}}},
            },
        },
        "correctness": {
            "violations": {"device held twice": violations} if violations else {},
            "schedulerDoubleAllocations": doubles,
            "fabricTruth": {"IMP-10": {"checked": 1000, "violations": 0}},
        },
        "processes": {"kube-apiserver": {"peakRssMiB": 2048}},
        **extra,
    }


def _ga3(points: list[dict[str, Any]], release: str = "1.37.2") -> Any:
    review = Review([], {}, points, ["scale.json"])
    row = next(r for r in review.answers() if r[0].question.id == "GA-3")
    return next(a for a in row if a.release == release)


def test_a_5000_node_point_without_violations_answers_ga3() -> None:
    answer = _ga3([_point(100), _point(1000), _point(5000)])
    assert answer.status == ANSWERED
    assert list(answer.cells) == ["make scale, 100 nodes", "make scale, 1000 nodes", "make scale, 5000 nodes"]
    assert all(c.outcome == "passed" for c in answer.cells.values())


def test_smaller_points_only_answer_it_partly_and_say_which_size_was_reached() -> None:
    failed = _point(5000, failed="OutOfMemory('stopped: the machine has 2.9 GiB available')")
    del failed["correctness"]
    answer = _ga3([_point(1000), failed])
    assert answer.status == PARTLY
    assert "largest point that completed has 1000 nodes" in answer.why
    assert answer.cells["make scale, 5000 nodes"].outcome == "failed"
    assert "2.9 GiB available" in answer.cells["make scale, 5000 nodes"].reason


def test_a_broken_rule_fails_it_and_scheduler_double_allocations_are_counted_apart() -> None:
    assert _ga3([_point(5000, violations=2)]).status == FAILED
    doubled = _ga3([_point(5000, doubles=3)])
    assert doubled.status == PARTLY and "double-allocated 3 times" in doubled.why


def test_a_release_without_figures_is_not_answered_and_the_figures_are_listed_per_release() -> None:
    points = [_point(5000)]
    review = Review([], {"1.36.3": "no binaries"}, points, ["scale.json"])
    row = next(r for r in review.answers() if r[0].question.id == "GA-3")
    assert {a.release: a.status for a in row} == {"1.36.3": NOT_ANSWERED, "1.37.2": ANSWERED}
    assert review.figures("1.37.2") == [line(points[0])]
    assert "binding-conditions wait s p50 12, p99 30 (held by the benchmark)" in line(points[0])
    assert "one-minute load 3.1→4.2" in line(points[0]) and "scheduling attempt ms -" in line(points[0])
    points[0]["waves"]["withConditions"]["scheduler"]["algorithmMs"] = {"p50": 312.4567, "mean": 1234.5}
    assert "scheduling algorithm ms p50 312, mean 1234" in line(points[0])


def test_the_command_takes_the_figures_of_make_scale(tmp_path: Path) -> None:
    figures = tmp_path / "scale.json"
    figures.write_text(json.dumps([_point(100), _point(5000)]))
    out = tmp_path / "review"
    result = CliRunner().invoke(
        main, ["review", *map(str, _bundles(tmp_path)), "--out", str(out), "--scale", str(figures)]
    )
    assert result.exit_code == 0, result.output
    assert f"GA-3 (5000+ nodes) from: {figures}" in result.output
    markdown = (out / "review.md").read_text()
    ga3 = next(row for row in markdown.splitlines() if row.startswith("| **GA-3**"))
    assert "✅ answered: make scale, 100 nodes passed, make scale, 5000 nodes passed" in ga3
    assert "make scale 5000 nodes, 1000 pods per wave" in markdown
