"""IMP-8's restart matrix: which cells exist and which combinations are said unreachable, which cells a profile and
role cannot stage (and why), and how the cells go in batches (conformance/suite/implementation/restart_cells.py).
Pure code: no cluster."""

from __future__ import annotations

import itertools

import pytest

from conformance.implementation.profile import load_profile
from conformance.report.html import _restart_matrix
from conformance.suite.implementation.restart_cells import (
    AT_KILL,
    BY_NAME,
    CELLS,
    PATHS,
    STAGINGS,
    UNREACHABLE,
    Restart,
    batches,
    by_design,
    matrix_report,
    not_staged,
    note_earlier,
    stage_again,
)

CLAIMS = ("pending", "allocated", "ready", "released")
FAILING = {c.name: 2 for c in CELLS if c.failure}
FABRIC = ("free", "attaching", "attached", "detaching")


def test_every_combination_is_a_cell_or_said_unreachable() -> None:
    staged = {(c.claim, c.fabric) for c in CELLS if c.grid and not (c.move or c.multi)}
    said = {(c, f) for c, f, _ in UNREACHABLE}
    assert not staged & said, "a combination is both staged and said unreachable"
    assert staged | said == set(itertools.product(CLAIMS, FABRIC)), "every claim x fabric combination is accounted for"
    assert all(why for _, _, why in UNREACHABLE)
    assert set(AT_KILL) == set(BY_NAME), "every cell says what the record must show at the kill"
    moves = {c.fabric for c in CELLS if c.move}
    assert moves == {"attached to A", "detaching from A", "attaching to B"}


def _sizes(room: int, concurrency: int | None, devices: dict[str, int] | None = None) -> list[int]:
    found = batches(list(CELLS), room, concurrency, devices or {})
    assert [c for b in found for c in b] == list(CELLS), "every cell once, in order"
    return [len(b) for b in found]


@pytest.mark.parametrize(
    ("room", "concurrency", "devices", "sizes", "why"),
    [
        (512, None, {}, [18], "identified, many devices reach the node: one restart for every cell"),
        (6, None, {}, [6, 6, 6], "count-based, 6 fabric-only nodes: a node each"),
        (512, 1, {}, [1] * 18, "fabricConcurrency 1: one held operation at a time"),
        (512, 4, {}, [4, 3, 3, 4, 4], "fabricConcurrency 4: the multi-device cell counts two operations"),
        (8, None, {"multi-one-attaching": 4}, [7, 5, 6], "the multi-device cell takes its claim's devices"),
        (8, None, {"multi-one-attaching": 4} | FAILING, [7, 5, 5, 1], "a failure cell takes two devices"),
    ],
)
def test_cells_go_in_batches_that_fit(
    room: int, concurrency: int | None, devices: dict[str, int], sizes: list[int], why: str
) -> None:
    assert _sizes(room, concurrency, devices) == sizes, why


def test_what_a_profile_or_role_cannot_stage_says_why() -> None:
    kw = {"command": False, "counted": False, "multi": True, "concurrency": None, "second_node": True}
    assert not any(not_staged(c, **kw) for c in CELLS)
    command = {c.name for c in CELLS if not_staged(c, **(kw | {"command": True}))}
    down = {"released-attached", "move-attached-a", "allocated-free", "allocated-attached"}
    assert command == down | {"released-detached", "failed-seen"}
    counted = {c.name for c in CELLS if not_staged(c, **(kw | {"counted": True}))}
    assert counted == {"move-attached-a", "move-detaching-a", "move-attaching-b", *FAILING}
    no_failures = {c.name for c in CELLS if not_staged(c, **kw, failures=False)}
    assert no_failures == set(FAILING)
    assert "attachFailureReporting" in not_staged(BY_NAME["failed-hidden"], **kw, failures=False)
    assert "multiDeviceClaims" in not_staged(BY_NAME["multi-one-attaching"], **(kw | {"multi": False}))


def test_the_report_prints_each_cell_with_its_outcome() -> None:
    skipped = Restart("move-attached-a", "controller", "", skipped="count-based entries name no device")
    walked_not = Restart("allocated-free", "controller", "node-2", walked="its claim was not allocated")
    report = matrix_report([skipped, walked_not])
    rows = report["cells"]
    assert [r["outcome"] for r in rows] == ["not staged", "not walked"]
    assert rows[0]["why"] and rows[1]["lastSeen"] == ["the cell was not walked: its claim was not allocated"]
    assert {"claim", "fabric", "expected", "role", "cell"} <= set(rows[1])
    assert len(report["unreachable"]) == len(UNREACHABLE)
    assert isinstance(matrix_report(None)["cells"], str)


def test_the_html_report_shows_the_matrix_or_says_it_did_not_run() -> None:
    walked_not = Restart("allocated-free", "controller", "node-2", walked="its claim was not allocated")
    page = _restart_matrix({"restartMatrix": matrix_report([walked_not])})
    assert 'id="restart-matrix"' in page and "allocated-free" in page and "not walked" in page
    assert "not run" in _restart_matrix({}), "the anchor the page's navigation links to is always there"


def test_the_tests_are_the_cells_the_design_can_stage() -> None:
    def cells(name: str) -> set[str]:
        return set(by_design(load_profile(f"fixtures/profiles/{name}.yaml").profile))

    every = {c.name for c in CELLS}
    assert cells("reference") == every and by_design(None) == [c.name for c in CELLS]
    moves = {"move-attached-a", "move-detaching-a", "move-attaching-b"}
    assert every - cells("reference-counted") == moves | set(FAILING)
    down = {"released-attached", "move-attached-a", "allocated-free", "allocated-attached"}
    assert every - cells("reference-kind") == down | {"released-detached", "failed-seen"}


def test_every_path_is_walked_step_by_step() -> None:
    """Issue 41 item 2: the restart matrix holds a cell after every step of every path, each cell on one path."""
    on_paths = [name for names in PATHS.values() for name in names]
    assert sorted(on_paths) == sorted(BY_NAME), "every cell is on exactly one path"
    steps = {path: [BY_NAME[n].step for n in names] for path, names in PATHS.items()}
    assert steps["detach"] == ["decided", "guard made", "detach sent", "detach done", "offered again"]
    assert steps["failure"] == ["failure seen", "device out of offer", "failure reported"]
    assert all(BY_NAME[n].path == path for path, names in PATHS.items() for n in names)
    assert all(c.failure == (c.path == "failure") for c in CELLS)
    report = matrix_report([])
    assert report["paths"]["detach"][1] == {"step": "guard made", "cell": "released-guarded"}


def test_a_cell_the_suite_s_timing_missed_is_staged_again_up_to_a_bound() -> None:
    """Issue 37 item 1: 'not walked' (the stack acted first; a kill left the pool half-published) is never the
    outcome of a correct stack while a staging is left: the cell is staged again, the earlier staging owes nothing
    but its let-go, and only the last staging's 'not walked' fails IMP-8."""
    why = "not its claim allocated while controller was down: pool fabric-0 was left incomplete by the kill"
    first = Restart("allocated-free", "controller", "node-2", walked=why)
    passed = Restart("released-attached", "controller", "node-2")
    other_role = Restart("allocated-free", "fabric-manager", "node-2", walked=why)
    results = [first, passed, other_role]
    assert stage_again(results, "controller") == ["allocated-free"]
    assert first.staged_again and not other_role.staged_again and not passed.staged_again
    assert first.binding() == [] and first.result() == "not walked, staged again"
    row = matrix_report([first])["cells"][0]
    assert row["outcome"] == "not walked, staged again" and row["notWalked"] == why
    again = [Restart("allocated-free", "controller", "node-2", walked=why, attempt=a) for a in range(2, STAGINGS + 1)]
    for r in again:
        results.append(r)
        assert stage_again(results, "controller") == ([] if r.attempt == STAGINGS else ["allocated-free"])
    last = again[-1]
    assert not last.staged_again and last.binding() == [
        f"the cell was not walked (staged {STAGINGS} times; the last): {why}"
    ]
    note_earlier(results)
    assert last.notes == [
        f"staged {STAGINGS} times (" + "; ".join(f"staging {a} not walked: {why}" for a in range(1, STAGINGS)) + ")"
    ]
    assert matrix_report([last])["cells"][0]["attempt"] == STAGINGS


def test_a_later_staging_that_was_walked_is_the_one_judged() -> None:
    missed = Restart(
        "pending-free", "controller", "node-1", walked="an attach to its node had begun before the restart"
    )
    results = [missed]
    stage_again(results, "controller")
    walked = Restart("pending-free", "controller", "node-1", attempt=2)
    results.append(walked)
    assert stage_again(results, "controller") == [], "a walked staging is not staged again"
    assert missed.binding() == [] and walked.result() != "not walked"


def test_a_cell_that_could_not_be_staged_again_keeps_its_not_walked() -> None:
    """No later staging judged it (no room, no second node at the retry): the first staging's 'not walked' fails."""
    missed = Restart(
        "move-attached-a", "controller", "node-1", walked="A's claim not deleted while controller was down"
    )
    skipped = Restart("move-attached-a", "controller", "", skipped="no second node", attempt=2)
    results = [missed]
    stage_again(results, "controller")
    results.append(skipped)
    note_earlier(results)
    assert not missed.staged_again and missed.binding()[0].startswith("the cell was not walked")
