"""NodeLister (the list function is faked: a counter that answers names or raises)."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from fake_drivers.nodes import NodeLister


def test_a_refused_list_says_none_once_and_for_all(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def refuse() -> frozenset[str]:
        calls.append(1)
        raise ApiException(status=403, reason="Forbidden")

    nodes = NodeLister(refuse, "serving every configured node")
    assert nodes() is None and nodes() is None
    assert len(calls) == 1 and "may not list nodes (Forbidden): serving every configured node" in caplog.text


def test_names_are_reread_only_when_older_than_max_age_and_other_errors_propagate() -> None:
    answers = iter([frozenset({"a"}), frozenset({"a", "b"})])
    nodes = NodeLister(lambda: next(answers), "", max_age_s=3600)
    assert nodes() == nodes() == frozenset({"a"})
    fresh = NodeLister(lambda: next(answers), "")
    assert fresh() == frozenset({"a", "b"})

    def fail() -> frozenset[str]:
        raise ApiException(status=500, reason="Internal")

    with pytest.raises(ApiException):
        NodeLister(fail, "")()
