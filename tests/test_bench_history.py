"""Bench history: figures flattened from a report, kept per run, and what got slower printed (no cluster)."""

from __future__ import annotations

from pathlib import Path

from conformance.cluster.bench_history import Figure, compare_and_record, previous, suite_figures

REPORT = {
    "wallSeconds": 70.0,
    "cluster": {"bringUpSeconds": 3.0},
    "scenarios": {"a": {"outcome": "passed", "seconds": 10.0}, "b": {"outcome": "failed", "seconds": 1.0}},
    "measurements": {
        "attach_to_bind_seconds": {"median": 4.6, "p95": 5.3},
        "scale_pods_per_second_with_conditions": {"median": 6.0},
        "scale_pods_per_second_without_conditions": {"median": 12.0},
    },
}


def test_suite_figures_keep_passed_scenarios_and_know_which_way_is_better() -> None:
    figs = suite_figures(REPORT)
    assert figs["scenario a"] == Figure(10.0, "s")
    assert "scenario b" not in figs  # a failed scenario's time is no speed figure
    assert figs["SCALE-1 ratio with/without"] == Figure(0.5, "", "higher")
    assert figs["attach-to-bind p95"].value == 5.3


def test_first_run_is_kept_and_the_second_names_what_got_slower(tmp_path: Path) -> None:
    history = tmp_path / "bench-history"
    first = compare_and_record(history, "suite", suite_figures(REPORT))
    assert "nothing to compare with yet" in first[0]
    slower = {
        **REPORT,
        "wallSeconds": 90.0,  # +29 %, +20 s: slower
        "cluster": {"bringUpSeconds": 3.2},  # +7 %: within the noise margin
        "measurements": {
            **REPORT["measurements"],
            "scale_pods_per_second_with_conditions": {"median": 4.0},  # fewer pods/s is worse
        },
    }
    lines = compare_and_record(history, "suite", suite_figures(slower))
    text = "\n".join(lines)
    assert "slower:" in text and "suite wall time: 70.00 s -> 90.00 s (+29% worse)" in text
    assert "SCALE-1 pods/s with conditions: 6.00 pods/s -> 4.00 pods/s" in text
    assert "bring-up" not in text
    assert previous(history, "suite")["figures"]["suite wall time"]["value"] == 90.0
    assert previous(history, "cluster") is None  # kinds are compared only with their own kind


def test_nothing_slower_says_so(tmp_path: Path) -> None:
    compare_and_record(tmp_path, "suite", suite_figures(REPORT))
    assert "nothing got slower" in compare_and_record(tmp_path, "suite", suite_figures(REPORT))[-1]
