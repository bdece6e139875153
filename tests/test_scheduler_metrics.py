"""SCH-10 without a cluster: kube-scheduler's exposition parsed, its histogram's quantiles, the PreBind waits read from
hand-made records, and the reconciliation failing where the record and the metrics disagree (issue 38 item 6), or not
judging where the metrics cannot be read."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster.metrics import ALLOCATIONS, WAIT, Scrape, parse, quantile, window
from conformance.cluster.providers.base import ClusterInfo
from conformance.observe.prebind import UNCOUNTED, prebind_waits
from conformance.observe.prebind_metrics import MetricsRun, MetricsUnreadable, reconcile
from conformance.observe.recorder import Record

DRIVER = "gate-1234abcd.conformance.example.com"
_SEQ = itertools.count()
T0 = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"  # T0 as allocationTimestamp


def _exposition(counted: dict[str, int], observed: dict[str, list[float]], started: float = 100.0) -> str:
    """A Prometheus text exposition as kube-scheduler 1.37.2 writes it (counts per status, observations per status)."""
    lines = [
        f"# HELP {ALLOCATIONS} [ALPHA] Number of allocations using devices with BindingConditions",
        f"# TYPE {ALLOCATIONS} counter",
    ]
    labels = f'driver="{DRIVER}",profile="default-scheduler"'
    lines += [f'{ALLOCATIONS}{{{labels},status="{s}"}} {n}' for s, n in counted.items()]
    for status, values in observed.items():
        for k in range(14):
            le = 0.1 * 2**k
            lines.append(f'{WAIT}_bucket{{{labels},status="{status}",le="{le:g}"}} {sum(v <= le for v in values)}')
        lines.append(f'{WAIT}_bucket{{{labels},status="{status}",le="+Inf"}} {len(values)}')
        lines.append(f'{WAIT}_sum{{{labels},status="{status}"}} {sum(values)}')
        lines.append(f'{WAIT}_count{{{labels},status="{status}"}} {len(values)}')
    lines.append(f"process_start_time_seconds {started}")
    return "\n".join(lines) + "\n"


def test_the_exposition_is_read_per_driver_and_status_and_summed_over_profiles() -> None:
    text = _exposition({"success": 2, "timeout": 1}, {"success": [0.3, 4.0], "timeout": [20.5]})
    text += f'{ALLOCATIONS}{{driver="{DRIVER}",profile="other",status="success"}} 3\n'
    scrape = parse(text, T0)
    assert scrape.allocations == {(DRIVER, "success"): 5.0, (DRIVER, "timeout"): 1.0}
    assert scrape.waits == {(DRIVER, "success"): 2.0, (DRIVER, "timeout"): 1.0}
    assert scrape.started == 100.0 and scrape.families == {ALLOCATIONS, WAIT}


def test_quantiles_interpolate_inside_the_bucket_as_promql_does() -> None:
    bucket = {0.1: 0.0, 0.2: 0.0, 0.4: 0.0, 0.8: 0.0, 1.6: 0.0, 3.2: 0.0, 6.4: 10.0, float("inf"): 10.0}
    assert quantile(bucket, 0.5) == pytest.approx(4.8)  # halfway through (3.2, 6.4]
    assert quantile(bucket, 0.99) == pytest.approx(6.368)
    assert quantile({0.1: 0.0, float("inf"): 0.0}, 0.5) is None
    assert quantile({0.1: 0.0, 0.2: 0.0, float("inf"): 2.0}, 0.5) == 0.2, "past the last bound: that bound"


def _claim(rev: int, reserved: list[str], *, conditions: dict[str, str] | None = None, allocated: bool = True,
           type_: str = "MODIFIED", name: str = "c", at: float | None = None) -> Record:  # fmt: skip
    status: dict[str, Any] = {}
    if allocated:
        result = {
            "driver": DRIVER,
            "pool": "fabric",
            "device": "dev-0",
            "request": "r",
            "bindingConditions": ["attached"],
            "bindingFailureConditions": ["failed"],
        }
        status["allocation"] = {"devices": {"results": [result]}, "allocationTimestamp": STAMP}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved]
    if conditions:
        entries = [{"type": t, "status": s} for t, s in conditions.items()]
        status["devices"] = [{"driver": DRIVER, "pool": "fabric", "device": "dev-0", "conditions": entries}]
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "status": status}
    return Record(next(_SEQ), T0 + rev if at is None else at, "claim", type_, "ns", name, rev, obj)


def _pod(rev: int, name: str = "p", node: str | None = None, type_: str = "MODIFIED") -> Record:
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {"nodeName": node}}
    return Record(next(_SEQ), T0 + rev, "pod", type_, "ns", name, rev, obj)


def _record() -> list[Record]:
    """Three waits: one bound after its condition (success), one unreserved after its failure condition (failure),
    one unreserved a binding timeout (20 s) after allocationTimestamp (timeout)."""
    return [
        _pod(1),
        _claim(2, ["p"]),
        _claim(4, ["p"], conditions={"attached": "True"}),
        _pod(6, node="node-0"),
        _pod(10, "q"),
        _claim(11, ["q"], name="cq"),
        _claim(12, ["q"], name="cq", conditions={"failed": "True"}),
        _claim(14, [], name="cq", conditions={"failed": "True"}),
        _pod(15, "r"),
        _claim(16, ["r"], name="cr"),
        _claim(21, [], name="cr", at=T0 + 20.5),
    ]


def test_the_waits_and_their_outcomes_are_read_from_the_record() -> None:
    waits = prebind_waits(_record(), timeout_s=20)
    assert [(w.pod, w.end, set(w.possible)) for w in waits] == [
        ("ns/p", "bound", {"success"}),
        ("ns/q", "unreserved", {"failure"}),
        ("ns/r", "unreserved", {"timeout"}),
    ]
    assert waits[0].devices == {DRIVER: 1} and waits[0].end_at - waits[0].ready_at == pytest.approx(2.0)


def test_a_pod_deleted_while_it_waits_allows_every_end_it_could_have_had() -> None:
    [wait] = prebind_waits([_pod(1), _claim(2, ["p"]), _pod(3, type_="DELETED")], timeout_s=20)
    assert wait.end == "pod deleted" and wait.possible == {"error", "timeout", UNCOUNTED}
    [wait] = prebind_waits([_pod(1), _claim(2, ["p"]), _claim(3, ["p"], type_="DELETED")], timeout_s=20)
    assert wait.end == "claim deleted" and wait.possible == {"error", UNCOUNTED}


def test_a_reservation_removed_once_the_pod_is_being_deleted_allows_every_end_it_could_have_had() -> None:
    """The coexistence driver's waiting pod deleted when its phase ended (2026-12-07): its deletionTimestamp, then the
    reservation removed, then the pod gone. 1.37.2 counted the PreBind as `timeout`; an Unreserve would say `error`."""
    going = _pod(3)
    going.obj["metadata"]["deletionTimestamp"] = "2026-12-07T02:00:00Z"
    [wait] = prebind_waits([_pod(1), _claim(2, ["p"]), going, _claim(4, []), _pod(5, type_="DELETED")], timeout_s=20)
    assert wait.end == "unreserved (pod being deleted)" and wait.possible == {"error", "timeout", UNCOUNTED}
    assert wait.certain is None, "no lower bound from a wait whose end the record cannot see"


def test_a_reservation_for_a_pod_that_is_not_the_runs_bounds_nothing_from_below() -> None:
    [wait] = prebind_waits([_claim(2, ["stranger"]), _claim(30, [], at=T0 + 30)], timeout_s=20)
    assert wait.end == "unreserved" and wait.certain is None and UNCOUNTED in wait.possible


def test_a_claim_without_binding_conditions_is_no_wait() -> None:
    record = _claim(2, ["p"])
    del record.obj["status"]["allocation"]["devices"]["results"][0]["bindingConditions"]
    assert prebind_waits([_pod(1), record, _pod(3, node="node-0")], timeout_s=20) == []


def _scrapes(counted: dict[str, int], observed: dict[str, list[float]]) -> tuple[Scrape, Scrape]:
    return parse(_exposition({}, {}), T0), parse(_exposition(counted, observed), T0 + 60)


def test_metrics_that_count_every_wait_reconcile() -> None:
    before, after = _scrapes({"success": 1, "failure": 1, "timeout": 1}, {s: [1.0] for s in ("success", "failure")})
    after.waits[(DRIVER, "timeout")] = 1.0
    result = reconcile(window(before, after), prebind_waits(_record(), 20), exact=True)
    assert result.problems() == []
    assert result.sli["count"] == 1 and 0.8 <= result.sli["p50Seconds"] <= 1.6


def test_a_run_whose_record_and_metrics_disagree_fails() -> None:
    """The broken variant: the timeout the record saw is counted as a failure, and one success is missing."""
    before, after = _scrapes({"failure": 2}, {"failure": [1.0, 20.0]})
    problems = reconcile(window(before, after), prebind_waits(_record(), 20), exact=True).problems()
    assert f"{ALLOCATIONS}{{driver={DRIVER},status=success}} = 0, the record says 1" in problems
    assert f"{ALLOCATIONS}{{driver={DRIVER},status=failure}} = 2, the record says 1" in problems
    assert f"{ALLOCATIONS}{{driver={DRIVER},status=timeout}} = 0, the record says 1" in problems
    # On a shared cluster more than the record is allowed; fewer is not.
    shared = reconcile(window(before, after), prebind_waits(_record(), 20), exact=False).problems()
    assert not any("status=failure" in p for p in shared) and any("status=success" in p for p in shared)


def _info(
    version: str = "1.37.2", endpoint: str | None = "https://127.0.0.1:1", provider: str = "local"
) -> ClusterInfo:
    return ClusterInfo("c", provider, Path("/nonexistent"), version, {}, 20, True, [], scheduler_endpoint=endpoint)


def test_metrics_that_cannot_be_read_are_not_judged_with_the_reason() -> None:
    unreachable = MetricsRun.open(_info(), read=lambda url, _k: Scrape(T0, url, error="connection refused"))
    assert "cannot be read: connection refused" in unreachable.unreadable
    assert unreachable.report()["notJudged"] == unreachable.unreadable
    assert (
        "no address of kube-scheduler's secure port"
        in MetricsRun.open(_info(endpoint=None, provider="kind")).unreadable
    )
    assert "1.35 has no binding-conditions metrics" in MetricsRun.open(_info("1.35.4")).unreadable


def test_a_scheduler_restarted_in_the_window_is_not_judged() -> None:
    run = MetricsRun.open(_info(), read=lambda _u, _k: parse(_exposition({}, {}, started=100.0), T0))
    with pytest.raises(MetricsUnreadable, match="restarted"):
        run.settle(prebind_waits(_record(), 20), read=lambda _u, _k: parse(_exposition({}, {}, started=200.0), T0))


def test_the_end_is_read_once_every_wait_whose_end_the_record_did_not_see_has_ended_in_the_scheduler() -> None:
    run = MetricsRun.open(_info(), read=lambda _u, _k: parse(_exposition({}, {}), T0))
    counted = {"success": 1, "failure": 1, "timeout": 1}
    slept: list[float] = []
    # a fourth pod deleted while it waited (its wait began at T0+31): its PreBind may end unseen until T0+31+20+5
    record = [*_record(), _pod(30, "s"), _claim(31, ["s"], name="cs"), _pod(32, "s", type_="DELETED")]
    result = run.settle(
        prebind_waits(record, 20),
        read=lambda _u, _k: parse(_exposition(counted, {s: [2.0] for s in counted}), T0),
        clock=lambda: T0 + 40,
        sleep=slept.append,
    )
    assert slept == [pytest.approx(31 + 20 + 5 + 3 - 40)] and run.scrapes == 2 and result.problems() == []


def _two_devices(
    rev: int, reserved: list[str], conditions: dict[str, dict[str, str]], at: float | None = None
) -> Record:
    """A claim of two devices (dev-0, dev-1, in that order), reserved for `reserved`, with `conditions` per device."""
    record = _claim(rev, reserved, name="c2", at=at)
    results = record.obj["status"]["allocation"]["devices"]["results"]
    results.append(results[0] | {"device": "dev-1"})
    record.obj["status"]["devices"] = [
        {
            "driver": DRIVER,
            "pool": "fabric",
            "device": d,
            "conditions": [{"type": t, "status": s} for t, s in c.items()],
        }
        for d, c in conditions.items()
    ]
    return record


def test_a_failure_behind_a_device_the_scheduler_stops_at_is_no_failure_it_reads() -> None:
    """kube-scheduler reads a claim's results in order and stops at the first device not ready: dev-1's failure
    condition behind a dev-0 with no status entry is never read, and the wait ends by the binding timeout (1.37.2
    counted a hung attach's multi-device claim `timeout` where the record, reading every device, said `failure`).
    Behind a ready dev-0 it is read: `failure`."""
    failed = {"failed": "True"}
    hidden = [_pod(1), _two_devices(2, ["p"], {}), _two_devices(3, ["p"], {"dev-1": failed})]
    [wait] = prebind_waits([*hidden, _two_devices(21, [], {"dev-1": failed}, at=T0 + 20.5)], timeout_s=20)
    assert wait.possible == {"timeout"} and wait.failure_at is None and wait.failure_seen_at is not None
    ready = {"dev-0": {"attached": "True"}, "dev-1": failed}
    seen = [_pod(1), _two_devices(2, ["p"], {}), _two_devices(3, ["p"], ready), _two_devices(5, [], ready)]
    [wait] = prebind_waits(seen, timeout_s=20)
    assert wait.possible == {"failure"}
