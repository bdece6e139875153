"""Unit tests of IMP-19's order of a move (observe/moves.py judge_move) on hand-made probe answers (no fabric)."""

from __future__ import annotations

from conformance.observe.moves import judge_move
from conformance.observe.recorder import Sample

T0 = 1000.0


def _answers(*states: tuple[str, str] | None) -> list[Sample]:
    return [Sample(T0 + i * 0.1, T0 + i * 0.1 + 0.01, {"X": s} if s else {}) for i, s in enumerate(states)]


def test_a_device_that_leaves_a_before_it_is_attached_to_b_moves_in_order() -> None:
    path, problems = judge_move(
        _answers(("A", "attached"), ("A", "detaching"), None, ("B", "attaching"), ("B", "attached")), "X", "B"
    )
    assert not problems
    assert [p.split(" ", 1)[1] for p in path] == ["attached A", "detaching A", "free", "attaching B"]


def test_a_device_listed_on_b_straight_after_a_breaks_the_order() -> None:
    _, problems = judge_move(_answers(("A", "attached"), ("B", "attached")), "X", "B")
    assert len(problems) == 1 and "with no answer between showing it leave A" in problems[0]


def test_a_device_never_elsewhere_may_be_attached_to_b_at_once() -> None:
    assert judge_move(_answers(None, ("B", "attaching"), ("B", "attached")), "X", "B")[1] == []
