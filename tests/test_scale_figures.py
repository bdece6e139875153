"""`make scale`'s pure parts: a wave's moments from the record and its figures, the table of the points, and the
fabric configuration that reaches every node."""

from __future__ import annotations

from typing import Any

from conformance.cluster.providers.base import default_nodes
from conformance.observe.recorder import Record
from conformance.scale.stack import devices_per_fabric, fabric_config
from conformance.scale.table import closing, markdown, rows, text
from conformance.scale.waves import figures, moments, peak_waiting, quantile

NS = "scale-with-x"
CONDITIONS = ["gpu.fabric.example.com/attached"]


def _pod(name: str, claim: str, node: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodeName": node} if node else {},
        "status": {"resourceClaimStatuses": [{"name": "dev", "resourceClaimName": claim}]},
    }


def _claim(name: str, node: str | None = None, ready: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if node:
        result = {"driver": "d", "pool": "p", "device": name, "bindingConditions": CONDITIONS}
        selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "values": [node]}]}]}
        status["allocation"] = {"devices": {"results": [result]}, "nodeSelector": selector}
        if ready:
            cond = {"type": CONDITIONS[0], "status": "True"}
            status["devices"] = [{"driver": "d", "pool": "p", "device": name, "conditions": [cond]}]
    return {"metadata": {"name": name, "namespace": NS}, "status": status}


def _records(*entries: tuple[float, str, dict[str, Any]]) -> list[Record]:
    return [
        Record(i, at, kind, "MODIFIED", obj["metadata"]["namespace"], obj["metadata"]["name"], i + 1, obj)
        for i, (at, kind, obj) in enumerate(entries)
    ]


def _two_pods() -> list[Record]:
    return _records(
        (0.0, "pod", _pod("a", "a-dev")),
        (0.5, "pod", _pod("b", "b-dev")),
        (1.0, "claim", _claim("a-dev", "n1")),
        (2.0, "claim", _claim("b-dev", "n2")),
        (10.0, "claim", _claim("a-dev", "n1", ready=True)),
        (10.5, "claim", _claim("b-dev", "n2", ready=True)),
        (11.0, "pod", _pod("a", "a-dev", "n1")),
        (12.5, "pod", _pod("b", "b-dev", "n2")),
        (12.6, "pod", _pod("b", "b-dev", "n2")),  # a later change: the first binding counts
    )


def test_moments_are_the_first_of_each_kind() -> None:
    m = moments(
        [
            *_two_pods(),
            *_records((0.0, "pod", {**_pod("other", "x"), "metadata": {"name": "o", "namespace": "elsewhere"}})),
        ],
        NS,
    )
    assert set(m.pods) == {"a", "b"}
    assert m.pods["b"].bound == 12.5 and m.pods["b"].node == "n2"
    assert m.claim_of("a").allocated == 1.0 and m.claim_of("a").ready == 10.0 and m.claim_of("a").nodes == {"n1"}


def test_wave_figures() -> None:
    m = moments(_two_pods(), NS)
    assert peak_waiting(m) == 2
    f = figures(m, released=9.0)
    assert f["pods"] == 2 and f["bound"] == 2 and f["peakWaiting"] == 2
    assert f["secondsToAllBound"] == 12.5 and f["podsBoundPerSecond"] == 0.16
    assert f["secondsToAllAllocated"] == 2.0 and f["podsAllocatedPerSecond"] == 1.0
    assert f["conditionToBound"] == {"p50": 1.0, "p99": 2.0, "max": 2.0, "lastConditionToLastBound": 2.0}
    assert f["releaseToAllBound"] == 3.5 and f["releaseToLastCondition"] == 1.5
    assert f["misplaced"] == 0


def test_a_pod_bound_elsewhere_than_its_allocation_is_counted() -> None:
    records = _two_pods()
    records[-2] = Record(7, 12.5, "pod", "MODIFIED", NS, "b", 8, _pod("b", "b-dev", "n9"))
    assert figures(moments(records[:-1], NS))["misplaced"] == 1


def test_peak_waiting_ends_a_binding_before_a_new_allocation_at_the_same_moment() -> None:
    m = moments(
        _records(
            (0.0, "pod", _pod("a", "a-dev")),
            (0.0, "pod", _pod("b", "b-dev")),
            (1.0, "claim", _claim("a-dev", "n1")),
            (2.0, "pod", _pod("a", "a-dev", "n1")),
            (2.0, "claim", _claim("b-dev", "n1")),
        ),
        NS,
    )
    assert peak_waiting(m) == 1


def test_quantile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert quantile(values, 0.5) == 50.0 and quantile(values, 0.99) == 99.0 and quantile([], 0.5) is None


def test_the_fabric_reaches_every_node_with_enough_devices() -> None:
    nodes = default_nodes(10, 4)
    config = fabric_config(nodes, 4, devices_per_fabric(1000, 4))
    reached = sorted(n for f in config["fabrics"] for n in f["nodes"])
    assert reached == sorted(n.name for n in nodes)
    assert [f["id"] for f in config["fabrics"]] == ["fabric-0", "fabric-1", "fabric-2", "fabric-3"]
    assert config["fabrics"][1]["nodes"] == ["node-1", "node-5", "node-9"]
    assert sum(f["devices"][0]["count"] for f in config["fabrics"]) >= 1000


POINT = {
    "nodes": 100,
    "pods": 1000,
    "load1mAtStart": 9.04,
    "load1mAtEnd": 11.0,
    "bringUp": {"seconds": 10.2, "nodesPerSecond": 117.0},
    "waves": {
        "withoutConditions": {
            "podsBoundPerSecond": 50.0,
            "resourceclaimsStatusWrites": {"PUT": {"p50": 4, "p99": 9.5}},
        },
        "withConditions": {
            "podsAllocatedPerSecond": 30.0,
            "peakWaiting": 1000,
            "scheduler": {
                "bindingConditions": {"scheduler_dra_x_duration_seconds": {"success": {"p50": 20.0, "p99": 31.5}}}
            },
        },
    },
    "correctness": {
        "violations": {"bound-early": 1},
        "schedulerDoubleAllocations": 2,
        "fabricTruth": {"IMP-10": {"checked": 1000, "violations": 0}},
    },
    "processes": {"kube-apiserver": {"peakRssMiB": 812}, "suite": {"peakRssMiB": 300, "cpuSeconds": 120.4}},
}


def test_table_has_a_column_per_point_and_says_what_failed() -> None:
    table = rows([POINT, {"nodes": 5000, "failed": "WaitTimeout('nodes not Ready')"}])
    assert table[0] == ["figure", "100 nodes", "5000 nodes"]
    by_label = {r[0].strip(): r[1:] for r in table[1:]}
    assert by_label["load (1 min) at start / end"] == ["9.0 / 11.0", "-"]
    assert by_label["binding-conditions wait p50 / p99 (s)"] == ["20.0 / 31.5", "-"]
    assert by_label["ratio into PreBind with / bound without"] == ["0.60", "-"]
    assert by_label["violations / scheduler double allocations"] == ["1 / 2", "-"]
    without = next(r for r in table if r[0].strip() == "claims status writes p50 / p99 (ms)")  # the first wave's
    assert without[1] == "PUT 4 / 9.5"
    assert by_label["peak RSS MiB: apiserver / etcd / scheduler"][0] == "812 / - / -"
    assert by_label["failed"] == ["", "WaitTimeout('nodes not Ready')"]


def test_the_closing_note_gives_wall_time_and_each_point_peak_memory() -> None:
    point = {**POINT, "wallSeconds": 300.4, "leastAvailableGiB": 14.2}
    note = closing([point, {"nodes": 5000, "failed": "x"}], 1234.5)
    assert note == (
        "wall time 1234 s; 100 nodes: 300.4 s, peak memory <= 1112 MiB (kube-apiserver 812, suite 300; machine's "
        "least available 14.2 GiB); 5000 nodes: - s, peak memory <= - MiB (machine's least available - GiB) FAILED"
    )


def test_text_and_markdown_render_every_row() -> None:
    md = markdown([POINT])
    assert md[0] == "| figure | 100 nodes |" and md[1] == "|---|---|"
    assert len(md) == len(rows([POINT])) + 1
    lines = text([POINT])
    assert len({len(line) for line in lines}) == 1  # aligned columns


def test_scale_1_quotes_the_latency_figures_the_kep_asks_for() -> None:
    from conformance.suite.implementation.test_scale import Scale, Wave, latency_note

    with_ = Wave(16, 8.0, 16, 12, 16, [], [float(s) for s in range(1, 17)])
    without = Wave(16, 4.0, 16, 0, 16, [], [0.1] * 16)
    note = latency_note(Scale(with_, without))
    assert note == (
        "16 pods with binding conditions (the KEP's stress test: 1000, --scale-pods 1000), up to 12 waiting in PreBind "
        "at once: in PreBind p50 8.50 s, p99 15.85 s; 2.0 pods bound per second (4.0 without conditions, ratio 0.50); "
        "all bound in 8.0 s"
    )
    assert Wave(1, 1.0, 1, 1, 1, [], [2.0]).prebind() == "not measured"
