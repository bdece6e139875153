"""Unit tests of the order clauses judged over the record (conformance/observe/order.py), on hand-made records: a
correct order passes whatever stream delivered first, a wrong one fails with both revisions on its first line."""

from __future__ import annotations

from typing import Any

from conformance.observe import order
from conformance.observe.recorder import Record, Sample
from conformance.observe.summaries import slice_summary

DRIVER = "gpu.example.com"
T0 = 1000.0
FAILED, READY, MOVE = "x/failed", "x/ready", "x/reschedule"
MEANINGS = {FAILED: "failure", MOVE: "reschedule"}


def _slice(rv: int, name: str = "fabric", node: str = "", taint: bool = False, listed: bool = True) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "d0", "attributes": {"uuid": {"string": "U0"}}}
    if taint:
        device["taints"] = [{"key": "failed", "effect": "NoSchedule"}]
    spec: dict[str, Any] = {"driver": DRIVER, "pool": {"name": name, "generation": 1}}
    spec["devices"] = [device] if listed else []
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    return slice_summary({"metadata": {"name": name, "resourceVersion": str(rv)}, "spec": spec}, "uuid")


def _claim(rv: int, conditions: dict[str, str] | None, pool: str = "fabric", name: str = "c") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if conditions is not None:
        field = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
        result = {"driver": DRIVER, "pool": pool, "device": "d0", "request": "r"}
        result |= {"bindingConditions": [READY], "bindingFailureConditions": [FAILED, MOVE]}
        entry = {"driver": DRIVER, "pool": pool, "device": "d0"}
        entry["conditions"] = [{"type": t, "status": s} for t, s in conditions.items()]
        status = {
            "allocation": {
                "allocationTimestamp": "t1",
                "devices": {"results": [result]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [field]}]},
            },
            "devices": [entry],
        }
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(rv)}
    return {"metadata": meta, "status": status}


def _pod(rv: int, node: str | None = "n1", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "resourceVersion": str(rv)}
    if deleting:
        meta["deletionTimestamp"] = "now"
    spec: dict[str, Any] = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec}


def _rule(rv: int) -> dict[str, Any]:
    spec = {"taint": {"key": "q", "effect": "NoSchedule"}, "deviceSelector": {"driver": DRIVER, "pool": "fabric"}}
    return {"metadata": {"name": "q-U0", "resourceVersion": str(rv)}, "spec": spec}


def _records(*events: tuple[float, str, int, dict[str, Any]], fabric: bool = True) -> list[Record]:
    out = [Record(0, T0 - 10, "slice", "ADDED", "", "fabric", 1, _slice(1))] if fabric else []
    for at, kind, rv, obj in events:
        ns = (obj.get("metadata") or {}).get("namespace", "")
        name = (obj.get("metadata") or {}).get("name") or obj.get("pool") or "fabric"
        event = "DELETED" if obj.get("deleted") else "MODIFIED"
        out.append(Record(len(out), at, kind, event, ns, name, rv, obj))
    return out


def _judge(records: list[Record], samples: list[Sample] | None = None) -> order.Order:
    return order.judge(records, samples or [], DRIVER, "uuid", {("fabric", "d0"): "U0"}, MEANINGS)


def _first(found: order.Order, clause: str) -> str:
    violations = found.verdicts.violations.get(clause, [])
    assert violations, found.verdicts
    return violations[0].splitlines()[0]


# -- HIDDEN: out of offer no later than the failure condition ----------------------------------------------------


def test_a_device_tainted_before_its_failure_is_reported_passes() -> None:
    found = _judge(
        _records(
            (T0, "claim", 5, _claim(5, {})),
            (T0 + 1.2, "taintrule", 9, _rule(9)),  # delivered after the failure, written before it
            (T0 + 1, "claim", 10, _claim(10, {FAILED: "True"})),
        )
    )
    assert found.verdicts.checked.get(order.HIDDEN) == 1 and not found.verdicts.violations, found.verdicts


def test_a_device_hidden_after_the_failure_but_before_the_deallocation_fails_with_both_revisions() -> None:
    found = _judge(
        _records(
            (T0, "claim", 5, _claim(5, {})),
            (T0 + 1, "claim", 10, _claim(10, {FAILED: "True"})),
            (T0 + 2, "taintrule", 11, _rule(11)),  # hidden a second later: still before the scheduler's poll
            (T0 + 5, "claim", 12, _claim(12, None)),
        )
    )
    line = _first(found, order.HIDDEN)
    assert "claim ns/c device fabric/d0 (U0) on n1" in line and "True at revision 10" in line, line
    assert "out of offer only at revision 11" in line and "taintrule q-U0" in line, line


def test_a_node_local_device_left_in_its_slice_when_its_failure_is_reported_fails() -> None:
    """A readiness gate: the node's daemon must drop the device from its slice before the claim is told."""
    local = _slice(2, "n1", node="n1")
    records = _records(
        (T0 - 9, "slice", 2, local),
        (T0, "claim", 5, _claim(5, {}, pool="n1")),
        (T0 + 1, "claim", 10, _claim(10, {FAILED: "True"}, pool="n1")),
        (T0 + 1.5, "slice", 11, _slice(11, "n1", node="n1", listed=False)),
        fabric=False,
    )
    line = _first(order.judge(records, [], DRIVER, "uuid", {}, MEANINGS), order.HIDDEN)
    assert "device n1/d0 (U0) on n1" in line and "out of offer only at revision 11" in line, line
    records = _records(
        (T0 - 9, "slice", 2, local),
        (T0, "claim", 5, _claim(5, {}, pool="n1")),
        (T0 + 1, "slice", 9, _slice(9, "n1", node="n1", listed=False)),
        (T0 + 1.1, "claim", 10, _claim(10, {FAILED: "True"}, pool="n1")),
        fabric=False,
    )
    assert not order.judge(records, [], DRIVER, "uuid", {}, MEANINGS).verdicts.violations


def test_a_count_entrys_failed_device_given_to_another_claim_before_its_failure_is_reported_fails() -> None:
    """Count entries name no device: the failed one (the claim's status data) is offered only by an assignment."""
    counted = Record(0, T0 - 10, "slice", "ADDED", "", "fabric", 1, _slice(1) | {"devices": [{"name": "d0"}]})

    def entry(rv: int, name: str, conditions: dict[str, str]) -> dict[str, Any]:
        obj = _claim(rv, conditions, name=name)
        obj["status"]["devices"][0]["data"] = {"uuid": "U0"}
        return obj

    records = [counted, *_records((T0, "claim", 5, entry(5, "c", {})), fabric=False)]
    records += _records((T0 + 1, "claim", 10, entry(10, "c", {FAILED: "True"})), fabric=False)
    assert _judge(records).verdicts.checked.get(order.HIDDEN) == 1 and not _judge(records).verdicts.violations
    early = records[:2] + _records((T0 + 0.5, "claim", 8, entry(8, "other", {})), fabric=False) + records[2:]
    line = _first(order.judge(early, [], DRIVER, "uuid", {}, MEANINGS), order.HIDDEN)
    assert "True at revision 10" in line and "claim ns/other (revision 8" in line, line


def test_a_reschedule_is_no_failure_of_the_device() -> None:
    found = _judge(_records((T0, "claim", 5, _claim(5, {})), (T0 + 1, "claim", 10, _claim(10, {MOVE: "True"}))))
    assert not found.verdicts.checked.get(order.HIDDEN), found.verdicts


# -- COPY: reschedule only once the node-local copy is published -------------------------------------------------


def test_a_reschedule_after_the_copy_is_published_passes_and_one_before_fails() -> None:
    copy = _slice(8, "n1-local", node="n1")
    good = _judge(
        _records(
            (T0, "claim", 5, _claim(5, {})),
            (T0 + 1.1, "slice", 8, copy),
            (T0 + 1, "claim", 10, _claim(10, {MOVE: "True"})),
        )
    )
    assert good.verdicts.checked.get(order.COPY) == 1 and not good.verdicts.violations, good.verdicts
    bad = _judge(
        _records(
            (T0, "claim", 5, _claim(5, {})),
            (T0 + 1, "claim", 10, _claim(10, {MOVE: "True"})),
            (T0 + 3, "slice", 12, _slice(12, "n1-local", node="n1")),
        )
    )
    line = _first(bad, order.COPY)
    assert "True at revision 10" in line and "listed U0 first at revision 12" in line, line


def test_a_reschedule_while_another_claim_holds_the_device_is_not_judged() -> None:
    other = _claim(4, {}, pool="n1-local", name="other")
    found = _judge(
        _records(
            (T0 - 2, "slice", 3, _slice(3, "n1-local", node="n1")),
            (T0 - 1, "claim", 4, other),
            (T0, "claim", 5, _claim(5, {})),
            (T0 + 1, "claim", 10, _claim(10, {MOVE: "True"})),
        )
    )
    assert not found.verdicts.checked.get(order.COPY), found.verdicts
    assert any("another claim held" in u for u in found.verdicts.unjudged[order.COPY]), found.verdicts


# -- ATTACHED: True only once attached to that node ---------------------------------------------------------------


def _samples(*states: tuple[float, tuple[str, str] | None]) -> list[Sample]:
    return [Sample(t, t + 0.02, {"U0": s} if s else {}) for t, s in states]


def test_conditions_true_while_the_fabric_still_attaches_fail_even_if_attached_by_the_next_poll() -> None:
    """Set True, then attached 1.5 s later: the scheduler's next poll would see both right; the record does not."""
    records = _records((T0, "claim", 5, _claim(5, {})), (T0 + 1, "claim", 10, _claim(10, {READY: "True"})))
    samples = _samples(
        (T0 + 0.5, ("n1", "attaching")), (T0 + 1.05, ("n1", "attaching")), (T0 + 2.5, ("n1", "attached"))
    )
    line = _first(_judge(records, samples), order.ATTACHED)
    assert "['x/ready'] True at revision 10" in line and "says attaching on n1" in line, line
    assert "attached on n1 first in the answer sent" in line and "(+1.50 s)" in line, line
    samples = _samples((T0 + 0.5, ("n1", "attached")), (T0 + 1.05, ("n1", "attached")))
    assert not _judge(records, samples).verdicts.violations


def test_a_true_write_delivered_late_while_the_device_already_leaves_is_not_early() -> None:
    """The claim stream delivered the True write (revision 10) at T0+1, after the fabric had attached the device
    (answer sent T0+0.9) and, the pod bound and deleted at once, had begun to detach it (answer sent T0+1.05).
    Attached 0.2 s before the delivery then leaving is a late delivery; attaching before it is still early."""
    records = _records((T0, "claim", 5, _claim(5, {})), (T0 + 1, "claim", 10, _claim(10, {READY: "True"})))
    late = _samples((T0 + 0.9, ("n1", "attached")), (T0 + 1.05, ("n1", "detaching")), (T0 + 1.5, None))
    assert not _judge(records, late).verdicts.violations
    early = _samples((T0 + 0.9, ("n1", "attaching")), (T0 + 1.05, ("n1", "attaching")), (T0 + 1.5, ("n1", "attached")))
    assert _first(_judge(records, early), order.ATTACHED)
    long_before = _samples((T0 - 2, ("n1", "attached")), (T0 + 1.05, ("n1", "detaching")))
    assert _first(_judge(records, long_before), order.ATTACHED), "attached 3 s before: not a delivery lag"


def test_conditions_true_while_attached_to_another_node_fail() -> None:
    records = _records((T0, "claim", 5, _claim(5, {})), (T0 + 1, "claim", 10, _claim(10, {READY: "True"})))
    line = _first(_judge(records, _samples((T0 + 1.05, ("n2", "attached")))), order.ATTACHED)
    assert "says attached on n2" in line and "never attached on n1" in line, line


# -- DETACH: only after the last pod using the device is gone ------------------------------------------------------


def _used(*after: tuple[float, str, int, dict[str, Any]]) -> list[Record]:
    return _records(
        (T0, "claim", 5, _claim(5, {})),
        (T0 + 1, "claim", 10, _claim(10, {READY: "True"})),
        (T0 + 2, "pod", 11, _pod(11)),
        *after,
    )


def test_a_detach_while_the_pod_still_runs_fails_with_the_pod_and_its_revision() -> None:
    records = _used((T0 + 8, "pod", 20, _pod(20) | {"deleted": True}))
    samples = _samples((T0 + 3, ("n1", "attached")), (T0 + 5, ("n1", "detaching")), (T0 + 6, None))
    line = _first(_judge(records, samples), order.DETACH)
    assert "device fabric/d0 (U0) on n1: detach began by" in line and "says detaching on n1" in line, line
    assert "pod ns/p, bound at revision 11" in line and "deleted only at revision 20" in line, line


def test_a_detach_after_the_pod_is_gone_passes() -> None:
    records = _used((T0 + 4, "pod", 20, _pod(20) | {"deleted": True}), (T0 + 4.5, "claim", 21, _claim(21, None)))
    samples = _samples((T0 + 3, ("n1", "attached")), (T0 + 5, ("n1", "detaching")), (T0 + 6, None))
    found = _judge(records, samples)
    assert found.verdicts.checked.get(order.DETACH) == 1 and not found.verdicts.violations, found.verdicts


def test_an_allocation_cleared_at_a_revision_before_the_bind_is_not_the_pods_even_if_delivered_after_it() -> None:
    """Soak 2026-12-07 (counted, late-attach-after-timeout): the fabric allocation cleared at revision 4616 (delivered
    at .239), the claim reallocated to a node-local copy at 4620, the pod bound at 4621 (delivered at .238, 1 ms
    earlier: another watch stream). The fabric device, unused, was detached while the pod ran on the copy."""

    def bound_at(revision: int) -> list[Record]:
        return _records(
            (T0, "claim", 5, _claim(5, {})),
            (T0 + 1, "claim", 10, _claim(10, {READY: "True"})),
            (T0 + 3.001, "claim", 16, _claim(16, None)),
            (T0 + 3.001, "claim", 20, _claim(20, {}, pool="node-local")),
            (T0 + 3.0, "pod", revision, _pod(revision)),
            (T0 + 9, "pod", 30, _pod(30) | {"deleted": True}),
        )

    samples = _samples((T0 + 4, ("n1", "attached")), (T0 + 5, ("n1", "detaching")), (T0 + 6, None))
    assert not _judge(bound_at(21), samples).verdicts.violations
    # bound at a revision before the clearing: the pod was bound with that device, and its detach is early
    assert "pod ns/p, bound at revision 15" in _first(_judge(bound_at(15), samples), order.DETACH)


def test_a_claim_deleted_while_its_pod_runs_keeps_the_device_attached() -> None:
    """The claim goes first (kept by its finalizer while reserved), the pod a few seconds later: the detach waits."""
    records = _used(
        (T0 + 3, "pod", 14, _pod(14, deleting=False)),
        (T0 + 9, "pod", 20, _pod(20) | {"deleted": True}),
    )
    samples = _samples((T0 + 3, ("n1", "attached")), (T0 + 4, ("n1", "detaching")))
    line = _first(_judge(records, samples), order.DETACH)
    assert "deleted only at revision 20" in line and "s later)" in line, line
