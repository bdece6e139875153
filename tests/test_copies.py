"""Unit tests of IMP-27's judgement of a device's copies over the record (copies.py), on hand-made records (a fake: no
watches, no probe endpoint; the copy-race scenario exercises it against the reference stacks)."""

from __future__ import annotations

from typing import Any

from conformance.observe.copies import judge
from conformance.observe.recorder import Record
from conformance.observe.summaries import slice_summary

DRIVER = "gpu.example.com"
T0 = 1000.0
IDS = {("fabric", "d0"): "U0", ("n1", "d0"): "U0"}


def _slice(pool: str, *, node: str = "", identity: bool = True, taint: bool = False, gen: int = 1) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "d0", "attributes": {"uuid": {"string": "U0"}} if identity else {}}
    if taint:
        device["taints"] = [{"key": "hold", "effect": "NoSchedule"}]
    spec: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool, "generation": gen}, "devices": [device]}
    spec |= {"nodeName": node} if node else {"allNodes": True}
    return slice_summary({"metadata": {"name": pool}, "spec": spec}, "uuid")


def _claim(name: str, pool: str | None, data: str | None = None, failed: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if pool:
        selector = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
        }
        result = {"driver": DRIVER, "pool": pool, "device": "d0", "request": "r"}
        result |= {"bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/reschedule"]}
        entry: dict[str, Any] = {"driver": DRIVER, "pool": pool, "device": "d0"}
        entry["conditions"] = [{"type": "x/reschedule", "status": "True" if failed else "False"}]
        if data:
            entry["data"] = {"uuid": data}
        status = {"allocation": {"devices": {"results": [result]}, "nodeSelector": selector}, "devices": [entry]}
    return {"metadata": {"name": name, "namespace": "ns", "uid": name}, "status": status}


def _rule() -> dict[str, Any]:
    return {
        "metadata": {"name": "hold-d0"},
        "spec": {"deviceSelector": {"driver": DRIVER, "device": "d0"}, "taint": {"key": "h", "effect": "NoSchedule"}},
    }


def _records(*events: tuple[float, int, str, str, dict[str, Any]]) -> list[Record]:
    out = []
    for at, rev, kind, kind_type, obj in events:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or obj.get("pool") or obj.get("device", "")
        out.append(Record(len(out), at, kind, kind_type, meta.get("namespace", ""), name, rev, obj))
    return out


def _moving(*after: tuple[float, int, str, str, dict[str, Any]], copy_taint: bool = True) -> list[Record]:
    """A holds the fabric entry from revision 5; the hold rule at 6; the copy appears at 8 (tainted by the rule unless
    copy_taint is False); A asks for the reschedule at 9."""
    rule = [(T0 + 0.5, 6, "taintrule", "ADDED", _rule())] if copy_taint else []
    return _records(
        (T0 - 10, 1, "slice", "ADDED", _slice("fabric")),
        (T0, 5, "claim", "ADDED", _claim("a", "fabric")),
        *rule,
        (T0 + 1, 8, "slice", "ADDED", _slice("n1", node="n1")),
        (T0 + 1.5, 9, "claim", "MODIFIED", _claim("a", "fabric", failed=True)),
        *after,
    )


def test_the_copy_hidden_until_the_fabric_allocation_is_cleared_is_no_race() -> None:
    races = judge(
        _moving(
            (T0 + 5, 10, "claim", "MODIFIED", _claim("a", None)),
            (T0 + 5.1, 11, "taintrule", "DELETED", _rule()),
            (T0 + 5.2, 12, "claim", "ADDED", _claim("b", "n1")),
        ),
        DRIVER,
        "uuid",
        IDS,
        {"ns"},
    )
    assert races.violations == [] and races.identities == ["U0"] and races.revisions >= 4, races
    assert [h.claim for h in races.holdings] == ["ns/a", "ns/b"]


def test_a_copy_given_before_the_reschedule_is_asked_for_is_held_twice() -> None:
    """No threshold: the copy went to a waiting pod 10 ms after it appeared, while the moving claim held the device."""
    races = judge(
        _records(
            (T0 - 10, 1, "slice", "ADDED", _slice("fabric")),
            (T0, 5, "claim", "ADDED", _claim("a", "fabric")),
            (T0 + 1, 8, "slice", "ADDED", _slice("n1", node="n1")),
            (T0 + 1.01, 9, "claim", "ADDED", _claim("b", "n1")),
            (T0 + 1.5, 10, "claim", "MODIFIED", _claim("a", "fabric", failed=True)),
            (T0 + 5, 11, "claim", "MODIFIED", _claim("a", None)),
        ),
        DRIVER,
        "uuid",
        IDS,
        {"ns"},
    )
    [found] = races.held_twice
    text = str(found)
    assert "U0 held twice for 1 revisions" in text, text
    assert "ns/b held n1/d0 from revision 9" in text and "ns/a held fabric/d0 from revision 5" in text, text
    assert "to revision 10" in text and "x/reschedule True" in text, text
    assert races.offered == [], "free for 10 ms: within the streams' skew, excused as an offer (not as a holding)"


def test_a_copy_given_once_the_reschedule_is_asked_for_is_the_moving_claims_no_longer() -> None:
    races = judge(
        _moving(
            (T0 + 1.6, 10, "taintrule", "DELETED", _rule()),
            (T0 + 1.61, 11, "claim", "ADDED", _claim("b", "n1")),
            (T0 + 1.62, 12, "claim", "MODIFIED", _claim("a", None)),
        ),
        DRIVER,
        "uuid",
        IDS,
        {"ns"},
    )
    assert races.violations == [] and races.scheduler == [], races


def test_a_copy_offered_while_held_longer_than_the_streams_skew_is_an_offer() -> None:
    """Opened by a slice's record, closed by a claim's: a lag between the two streams inflates the offer, so one
    shorter than SKEW_S (1 s) is not told from a few milliseconds' one."""

    def offered(asked_at: float) -> list[str]:  # the copy listed at T0 + 1, untainted; the reschedule asked later
        moving = _records(
            (T0 - 10, 1, "slice", "ADDED", _slice("fabric")),
            (T0, 5, "claim", "ADDED", _claim("a", "fabric")),
            (T0 + 1, 8, "slice", "ADDED", _slice("n1", node="n1")),
            (asked_at, 9, "claim", "MODIFIED", _claim("a", "fabric", failed=True)),
            (asked_at + 3, 10, "claim", "MODIFIED", _claim("a", None)),
        )
        return judge(moving, DRIVER, "uuid", IDS, {"ns"}).offered

    assert offered(T0 + 1.5) == [], "0.5 s between two streams' records: within their skew"
    [offer] = offered(T0 + 3)
    assert "offered free from revision 8" in offer and "for 2.00 s" in offer and "n1:d0" in offer, offer
    assert "ns/a held fabric/d0 from revision 5" in offer, offer


def test_one_entry_in_two_claims_is_the_schedulers_not_judged_here() -> None:
    races = judge(
        _records(
            (T0 - 10, 1, "slice", "ADDED", _slice("fabric")),
            (T0, 5, "claim", "ADDED", _claim("a", "fabric")),
            (T0 + 1, 6, "claim", "ADDED", _claim("b", "fabric")),
        ),
        DRIVER,
        "uuid",
        IDS,
        {"ns"},
    )
    assert races.held_twice == [] and len(races.scheduler) == 1, races


def test_a_count_entry_is_the_device_its_status_names_else_the_probes_one_attach() -> None:
    counted = {("n1", "d0"): "U0"}
    entry = _slice("fabric", identity=False)

    def run(a: dict[str, Any], probe: bool) -> list[str]:
        attach = {"device": "U0", "node": "n1", "state": "attaching", "previous": []}
        records = _records(
            (T0 - 10, 1, "slice", "ADDED", entry),
            (T0, 5, "claim", "ADDED", a),
            *([(T0 + 0.2, 0, "probe", "CHANGED", attach)] if probe else []),
            (T0 + 1, 8, "slice", "ADDED", _slice("n1", node="n1")),
            (T0 + 1.1, 9, "claim", "ADDED", _claim("b", "n1")),
        )
        return [h.how for h in judge(records, DRIVER, "uuid", counted, {"ns"}).held_twice for h in (h.first,)]

    assert run(_claim("a", "fabric", data="U0"), probe=False) == ["status data"]
    assert run(_claim("a", "fabric"), probe=True) == ["fabric probe"]
    races = judge(
        _records((T0 - 10, 1, "slice", "ADDED", entry), (T0, 5, "claim", "ADDED", _claim("a", "fabric"))),
        DRIVER,
        "uuid",
        counted,
        {"ns"},
    )
    assert races.identities == [] and len(races.unidentified) == 1, races
