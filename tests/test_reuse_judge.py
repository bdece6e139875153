"""Unit tests of the reuse judgement (conformance/observe/reuse.py, IMP-28) on hand-made records: each second use is
named by its path, and what it carried over from the first fails with the reuse on the first line."""

from __future__ import annotations

from typing import Any

from conformance.observe import reuse
from conformance.observe.order import attach_problem
from conformance.observe.recorder import Record, Sample
from conformance.observe.steps import steps
from conformance.observe.summaries import slice_summary

DRIVER = "gpu.example.com"
T0 = 1000.0
FAILED, READY = "x/failed", "x/ready"
MEANINGS = {FAILED: "failure"}
IDS = {("fabric", "d0"): "U0", ("n1", "d0"): "U0"}


def _claim(name: str, rv: int, conditions: dict[str, str] | None, node: str = "n1", pool: str = "fabric") -> Record:
    status: dict[str, Any] = {}
    if conditions is not None:
        field = {"key": "metadata.name", "operator": "In", "values": [node]}
        result = {"driver": DRIVER, "pool": pool, "device": "d0", "request": "r"}
        result |= {"bindingConditions": [READY], "bindingFailureConditions": [FAILED]}
        entry = {"driver": DRIVER, "pool": pool, "device": "d0"}
        entry["conditions"] = [{"type": t, "status": s} for t, s in conditions.items()]
        status = {
            "allocation": {
                "allocationTimestamp": f"t-{name}",
                "devices": {"results": [result]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [field]}]},
            },
            "devices": [entry],
        }
    ns = "churn" if name != "before" else "other"
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": str(rv)}
    return Record(rv, T0 + rv / 10, "claim", "MODIFIED", ns, name, rv, {"metadata": meta, "status": status})


def _local_slice() -> Record:
    spec = {"driver": DRIVER, "pool": {"name": "n1", "generation": 1}, "nodeName": "n1"}
    spec["devices"] = [{"name": "d0", "attributes": {"uuid": {"string": "U0"}}, "bindingConditions": [READY]}]
    return Record(
        0, T0, "slice", "ADDED", "", "n1", 1, slice_summary({"metadata": {"name": "n1"}, "spec": spec}, "uuid")
    )


def _judge(
    records: list[Record], armed_until: float = 0.0, ready: Any = None, armed_revision: int = 0
) -> tuple[list[reuse.Reuse], list[str]]:
    found = steps(records, DRIVER, "uuid", IDS, MEANINGS)
    reuses = reuse.reuses(found, {"churn"}, records, driver=DRIVER, attribute="uuid", identities=IDS, meanings=MEANINGS)
    return reuses, reuse.judge(reuses, found, armed_until, ready, armed_revision)


def _first_use(first: dict[str, str], node: str = "n1") -> list[Record]:
    return [_claim("before", 2, {}, node), _claim("before", 3, first, node), _claim("before", 4, None, node)]


def test_each_second_use_is_named_by_its_path() -> None:
    released, _ = _judge([*_first_use({READY: "True"}), _claim("c1", 10, {}), _claim("c1", 11, {READY: "True"})])
    assert [r.path for r in released] == [reuse.AFTER_RELEASE], released
    failed, _ = _judge([*_first_use({FAILED: "True"}), _claim("c1", 10, {})])
    assert [r.path for r in failed] == [reuse.AFTER_FAILURE], failed
    moved, _ = _judge([*_first_use({READY: "True"}, node="n2"), _claim("c1", 10, {})])
    assert [r.path for r in moved] == [reuse.AFTER_MOVE], moved
    local = [_local_slice(), _claim("before", 2, {}, pool="n1"), _claim("before", 3, {READY: "True"}, pool="n1")]
    local += [_claim("before", 4, None), _claim("c1", 10, {}, pool="n1")]
    readied, _ = _judge(local)
    assert [r.path for r in readied] == [reuse.READIED_ONCE], readied
    first, _ = _judge([_claim("c1", 10, {})])
    assert first == [], "a first use is no reuse"


def test_a_failure_carried_over_to_the_next_claim_fails_naming_the_reuse() -> None:
    records = [*_first_use({FAILED: "True"}), _claim("c1", 10, {}), _claim("c1", 11, {FAILED: "True"})]
    _, problems = _judge(records, armed_until=T0, armed_revision=5)
    assert problems and problems[0].startswith("U0 reused (after a failure): stale failure: ['x/failed'] True at"), (
        problems
    )
    assert "revision 11" in problems[0] and "claim churn/c1 device fabric/d0 (U0) on n1" in problems[0], problems
    _, armed = _judge(records, armed_until=T0 + 5)
    assert armed == [], "a failure while the suite's fault was armed is the suite's own"


def test_a_failure_on_an_allocation_made_while_armed_is_the_faults_whenever_written() -> None:
    """The fault refused c1's attach just before the disarm (allocated at revision 10, T0+1.0); the failure was
    written at 11 and delivered at T0+1.1, after the disarm (T0+1.05, revision 10): the fault's. c2, allocated after
    the disarm (revision 12), shows a failure: stale, whichever stream delivered what first."""
    records = [*_first_use({FAILED: "True"}), _claim("c1", 10, {}), _claim("c1", 11, {FAILED: "True"})]
    assert _judge(records, armed_until=T0 + 1.05, armed_revision=10)[1] == []
    records += [_claim("c1", 12, None), _claim("c2", 13, {}), _claim("c2", 14, {FAILED: "True"})]
    [stale] = _judge(records, armed_until=T0 + 1.05, armed_revision=10)[1]
    assert "churn/c2" in stale and "stale failure" in stale, stale
    # without the revision: an allocation delivered within the streams' skew after the disarm may be the fault's
    assert _judge(records[:5], armed_until=T0 + 0.5)[1] == []


def test_conditions_true_before_the_device_is_attached_again_are_a_stale_attachment() -> None:
    records = [*_first_use({READY: "True"}), _claim("c1", 10, {}), _claim("c1", 11, {READY: "True"})]
    samples = [Sample(T0 + 1.15, T0 + 1.16, {}), Sample(T0 + 1.5, T0 + 1.51, {"U0": ("n1", "attached")})]
    _, problems = _judge(records, ready=lambda s: attach_problem(s, samples))
    assert problems and problems[0].startswith("U0 reused (released): stale state: claim churn/c1"), problems
    assert "True at revision 11" in problems[0] and "says free" in problems[0], problems
    ok = [Sample(T0 + 1.15, T0 + 1.16, {"U0": ("n1", "attached")})]
    assert _judge(records, ready=lambda s: attach_problem(s, ok))[1] == []
