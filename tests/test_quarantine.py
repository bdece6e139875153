"""Unit tests of IMP-4's quarantine judged over the record (quarantine.py), on hand-made records (a fake: no watches,
no probe endpoint; the attach-failure scenario exercises it against the reference stacks)."""

from __future__ import annotations

from typing import Any

from conformance.observe import quarantine
from conformance.observe.quarantine import Quarantine
from conformance.observe.recorder import Record, Sample
from conformance.observe.summaries import slice_summary

DRIVER = "gpu.example.com"
T0 = 1000.0
Q = Quarantine("U0", "n1", 10, T0, T0 + 20)


def _slice(rv: int, taint: bool = False, selector_node: str | None = None) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "d0", "attributes": {"uuid": {"string": "U0"}}}
    if taint:
        device["taints"] = [{"key": "failed", "effect": "NoSchedule"}]
    spec: dict[str, Any] = {"driver": DRIVER, "pool": {"name": "fabric", "generation": 1}, "devices": [device]}
    if selector_node:
        field = {"key": "metadata.name", "operator": "In", "values": [selector_node]}
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [field]}]}
    else:
        spec["allNodes"] = True
    return slice_summary({"metadata": {"name": "fabric", "resourceVersion": str(rv)}, "spec": spec}, "uuid")


def _claim(rv: int, allocated: bool, failed: bool = False, data: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocated:
        selector = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
        }
        result = {"driver": DRIVER, "pool": "fabric", "device": "d0", "request": "r"}
        result |= {"bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/failed"]}
        entry: dict[str, Any] = {"driver": DRIVER, "pool": "fabric", "device": "d0"}
        entry["conditions"] = [{"type": "x/failed", "status": "True" if failed else "False"}]
        if data:
            entry["data"] = {"uuid": data}
        status = {
            "allocation": {"allocationTimestamp": f"t{rv}", "devices": {"results": [result]}, "nodeSelector": selector},
            "devices": [entry],
        }
    return {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": str(rv)}, "status": status}


def _records(*events: tuple[float, str, dict[str, Any]]) -> list[Record]:
    out = [Record(0, T0 - 10, "slice", "ADDED", "", "fabric", 1, _slice(1))]
    for at, kind, obj in events:
        rev = int(obj.get("metadata", {}).get("resourceVersion") or obj.get("rv", 0))
        ns = obj.get("metadata", {}).get("namespace", "")
        name = "fabric" if kind == "slice" else "c"
        out.append(Record(len(out), at, kind, "MODIFIED", ns, name, rev, obj))
    return out


def _slice_at(at: float, rv: int, **kw: Any) -> tuple[float, str, dict[str, Any]]:
    return (at, "slice", _slice(rv, **kw) | {"rv": rv})


def _judge(records: list[Record], samples: list[Sample] | None = None) -> list[str]:
    return quarantine.judge(records, samples or [], Q, DRIVER, "uuid", {("fabric", "d0"): "U0"})


def _failed_then(*after: tuple[float, str, dict[str, Any]]) -> list[Record]:
    return _records((T0 - 5, "claim", _claim(5, True)), (T0, "claim", _claim(10, True, failed=True)), *after)


def test_a_device_tainted_before_the_deallocation_is_never_offered() -> None:
    assert _judge(_failed_then(_slice_at(T0 + 0.5, 11, taint=True), (T0 + 3, "claim", _claim(12, False)))) == []


def test_a_taint_after_the_deallocation_is_an_offer_with_its_revision() -> None:
    found = _judge(_failed_then((T0 + 3, "claim", _claim(11, False)), _slice_at(T0 + 6, 12, taint=True)))
    assert len(found) == 1 and "offered free from revision 11" in found[0] and "for 3.0 s" in found[0], found


def test_an_offer_within_the_streams_skew_is_not_told_from_their_lag() -> None:
    """Deallocated at 11 (claim stream), tainted at 12 (slice stream) 0.4 s later as delivered: the offer's length is
    two streams' delivery times apart, within SKEW_S; 1.5 s is an offer."""
    late = _failed_then((T0 + 3, "claim", _claim(11, False)), _slice_at(T0 + 3.4, 12, taint=True))
    assert _judge(late) == []
    later = _failed_then((T0 + 3, "claim", _claim(11, False)), _slice_at(T0 + 4.5, 12, taint=True))
    assert len(_judge(later)) == 1


def test_revisions_decide_not_the_order_the_streams_delivered() -> None:
    """The taint's write (revision 11) came before the deallocation (12), although its event arrived later."""
    records = _failed_then((T0 + 3, "claim", _claim(12, False)), _slice_at(T0 + 3.05, 11, taint=True))
    assert _judge(records) == []


def test_an_offer_left_after_the_fault_was_cleared_is_not_judged() -> None:
    assert _judge(_failed_then(_slice_at(T0 + 0.5, 11, taint=True), _slice_at(T0 + 25, 12))) == []


def test_a_node_selector_narrowed_away_from_the_failed_node_hides_it_there() -> None:
    records = _failed_then(_slice_at(T0 + 0.5, 11, selector_node="n2"), (T0 + 3, "claim", _claim(12, False)))
    assert _judge(records) == []


def test_allocated_again_on_that_node_is_caught() -> None:
    records = _failed_then(
        _slice_at(T0 + 0.5, 11, taint=True),
        (T0 + 3, "claim", _claim(12, False)),
        (T0 + 4, "claim", _claim(13, True, data="U0")),
    )
    found = _judge(records)
    assert any("allocated again at revision 13" in f for f in found), found


def test_the_probe_shows_the_failed_device_attached_again() -> None:
    """A count entry has no identity: the probe's answers do."""
    samples = [Sample(T0 + 0.05, T0 + 0.06, {"U0": ("n1", "attaching")})]  # the failed attach itself, ending
    samples += [Sample(T0 + 5, T0 + 5.01, {"U0": ("n2", "attached")})]  # elsewhere: allowed (narrowing)
    assert _judge(_failed_then(_slice_at(T0 + 0.5, 11, taint=True)), samples) == []
    samples.append(Sample(T0 + 6, T0 + 6.01, {"U0": ("n1", "attaching")}))
    found = _judge(_failed_then(_slice_at(T0 + 0.5, 11, taint=True)), samples)
    assert found and "attaching on n1 again" in found[0], found
