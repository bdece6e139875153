"""SCH-9's judge over hand-made records (no apiserver): two claims holding one device entry at overlapping
revisions, and the cases that must not count."""

from __future__ import annotations

import itertools
from typing import Any

from conformance.observe.allocations import judge
from conformance.observe.recorder import Record

_SEQ = itertools.count()


def _claim(name: str, rev: int, device: str | None, type_: str = "MODIFIED", **result: Any) -> Record:
    status: dict[str, Any] = {}
    if device is not None:
        entry = {"driver": "d.example.com", "pool": "fabric", "device": device, "request": "r", **result}
        status["allocation"] = {"devices": {"results": [entry]}}
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "status": status}
    return Record(next(_SEQ), float(rev), "claim", type_, "ns", name, rev, obj)


def test_one_device_allocated_to_a_second_claim_while_the_first_holds_it_is_found() -> None:
    found = judge([_claim("a", 10, "dev-0"), _claim("a", 12, "dev-0"), _claim("b", 15, "dev-0")])
    assert [(d.first.claim, d.second.claim, d.second.start) for d in found.doubles] == [("ns/a", "ns/b", 15)]
    assert "allocated to ns/b at revision 15 while ns/a held it" in str(found.doubles[0])


def test_handing_a_device_over_after_its_deallocation_is_no_double() -> None:
    records = [_claim("a", 10, "dev-0"), _claim("a", 14, None), _claim("b", 15, "dev-0"), _claim("a", 16, None)]
    found = judge(records)
    assert not found.doubles and found.claims == 2 and len(found.holdings) == 2


def test_the_order_of_delivery_does_not_matter_only_revisions_do() -> None:
    # b's allocation delivered before a's deallocation, which was written first
    assert not judge([_claim("a", 10, "dev-0"), _claim("b", 15, "dev-0"), _claim("a", 14, None)]).doubles


def test_a_change_seen_only_by_a_relist_cannot_invent_a_double() -> None:
    # a was deallocated somewhere after revision 10 (unseen: a watch gap); b allocated at 12; a relist shows a at 20
    records = [_claim("a", 10, "dev-0"), _claim("b", 12, "dev-0"), _claim("a", 20, None, type_="SYNC")]
    assert not judge(records).doubles
    # a vanished from a relist: its DELETED carries the last state seen (revision 10), not the deletion's
    records = [_claim("a", 10, "dev-0"), _claim("b", 12, "dev-0"), _claim("a", 10, "dev-0", type_="DELETED")]
    assert judge(records).doubles == [], "a deletion inferred by a relist ends right after the last revision seen"


def test_a_deleted_claim_frees_its_device_at_its_deletion() -> None:
    records = [_claim("a", 10, "dev-0"), _claim("a", 13, "dev-0", type_="DELETED"), _claim("b", 15, "dev-0")]
    assert not judge(records).doubles
    records = [_claim("a", 10, "dev-0"), _claim("b", 12, "dev-0"), _claim("a", 13, "dev-0", type_="DELETED")]
    assert len(judge(records).doubles) == 1


def test_shared_and_admin_access_results_are_not_exclusive() -> None:
    records = [_claim("a", 10, "dev-0", shareID="s1"), _claim("b", 11, "dev-0", shareID="s2")]
    records += [_claim("c", 12, "dev-1", adminAccess=True), _claim("d", 13, "dev-1")]
    assert not judge(records).doubles
