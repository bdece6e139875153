"""The reach explainer and what a profile promises (observe/reach.py, observe/publishing.py), on synthetic slices and
nodes: no cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from conformance.cluster.providers.base import NodeSpec
from conformance.implementation.profile import Profile
from conformance.observe.publishing import PublishLog, count_shortfall, local_nodes
from conformance.observe.reach import explain, label_changes, lacks, pool_reach, selector_keys, shortfalls
from conformance.suite.scenario import REGISTRY, profile_gap

KEY = "late.example.com/fabric"


def _fabric(pool: str, spec: dict[str, Any], devices: int = 2) -> dict[str, Any]:
    device = {"name": "d", "bindsToNode": True, "bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/f"]}
    return {
        "metadata": {"name": pool, "resourceVersion": "1"},
        "spec": {"driver": "x", "pool": {"name": pool}, "devices": [device] * devices, **spec},
    }


def _selecting(value: str) -> dict[str, Any]:
    return {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": KEY, "operator": "In", "values": [value]}]}]
        }
    }


def _local(node: str) -> dict[str, Any]:
    return {
        "metadata": {"name": node},
        "spec": {"driver": "x", "pool": {"name": node}, "nodeName": node, "devices": [{"name": "l"}]},
    }


NODES = [NodeSpec("node-0", {}), NodeSpec("node-1", {}), NodeSpec("node-2", {KEY: "fabric-1"})]


def test_a_pool_whose_label_no_node_has_is_explained_node_by_node() -> None:
    slices = [_fabric("fabric-0", _selecting("fabric-0")), _local("node-0")]
    said = explain(slices, NODES, local={"node-0"})
    assert said.startswith(f"fabric pool fabric-0 (nodeSelector [{KEY}=fabric-0]) matches none of the 3 Ready")
    assert f"node-0, node-1 lack {KEY}=fabric-0 (has no {KEY})" in said
    assert f"node-2 lacks {KEY}=fabric-0 (has {KEY}=fabric-1)" in said
    assert shortfalls(slices, NODES, {"node-0"}, need_remote=True) == [
        "fabric pool fabric-0 reaches no Ready schedulable node",
        "no node without node-local devices is reached by a fabric pool",
    ]


def test_a_pool_that_reaches_only_nodes_with_local_devices_says_so() -> None:
    slices = [_fabric("fabric-0", {"allNodes": True}), _local("node-0")]
    nodes = NODES[:1]
    assert "matches node-0 (all with node-local devices)" in explain(slices, nodes, {"node-0"})
    assert shortfalls(slices, nodes, {"node-0"}, need_remote=True) == [
        "no node without node-local devices is reached by a fabric pool"
    ]
    assert shortfalls(slices, nodes, {"node-0"}, need_remote=False) == []


def test_reach_by_field_and_several_terms() -> None:
    by_name = {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-9"]}]}]
        }
    }
    assert lacks(by_name, NODES[0]) == "lacks metadata.name=node-9 (has metadata.name=node-0)"
    two = {"nodeSelector": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": KEY, "operator": "Exists"}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
    ]}}  # fmt: skip
    assert lacks(two, NODES[0]) == f"lacks [a label {KEY}] / [zone in ['a', 'b'] (has no zone)]"
    assert lacks(two, NODES[2]) is None
    assert pool_reach([_fabric("p", two)], NODES) == {"p": ["node-2"]}


def test_nothing_published_is_said() -> None:
    assert "no fabric pool" in explain([_local("node-0")], NODES, {"node-0"})
    assert shortfalls([], NODES, set(), need_remote=True) == ["no fabric pool is published"]


def test_label_changes_are_read_from_node_records() -> None:
    def rec(at: float, name: str, labels: dict[str, str], type_: str = "MODIFIED") -> Any:
        return SimpleNamespace(at=at, name=name, type=type_, obj={"labels": labels})

    records = [
        rec(1.0, "node-0", {}, "SYNC"),
        rec(2.0, "node-0", {"other": "x"}),
        rec(47.0, "node-0", {KEY: "fabric-0", "other": "x"}),
        rec(50.0, "node-0", {}),
    ]
    assert label_changes(records, {KEY}) == [
        (47.0, f"node-0 got {KEY}=fabric-0"),
        (50.0, f"node-0 lost {KEY}=fabric-0"),
    ]
    assert selector_keys(_fabric("p", _selecting("a"))) == {KEY}
    assert selector_keys(_local("node-0")) == set()


def _profile(**extra: Any) -> Profile:
    return Profile.model_validate(
        {"apiVersion": "dra-conformance.example.com/v1alpha1", "kind": "ImplementationProfile", "name": "p",
         "version": "1", "driver": "x", **extra}
    )  # fmt: skip


def test_the_promise_and_the_read_timeout_are_coherent() -> None:
    assert _profile().promises.publish_s == 60
    assert _profile().read_timeout_s() == 120
    assert _profile(promises={"publishSeconds": 200}).read_timeout_s() == 260
    assert _profile(published={"timeoutSeconds": 90}).read_timeout_s() == 90
    with pytest.raises(ValueError, match=r"shorter than promises\.publishSeconds"):
        _profile(published={"timeoutSeconds": 30})


def test_counts_owed_and_the_log_of_what_was_published() -> None:
    prof = _profile(published={"fabricDevices": 4})
    slices = [_fabric("fabric-0", {"allNodes": True}, devices=3), _local("node-0")]
    assert count_shortfall(slices, prof) == ["3 of 4 fabric devices published"]
    assert local_nodes(slices) == {"node-0"}
    log = PublishLog(ready_at=100.0, promise_s=60)
    log.note("a", at=100.5)
    log.note("a", at=101.0)  # unchanged: not a step
    log.note("b", at=147.0)
    log.read_at = 160.0
    assert log.deadline == 160.0
    assert log.describe().splitlines()[1:] == ["  +0.5s a", "  +47.0s b"]
    assert "devices read at +60.0s" in log.describe()


def test_probe_only_requirements_are_profile_gaps_that_profile_check_predicts() -> None:
    import conformance.suite.implementation.test_attach_before_bind  # noqa: F401 (registers the scenario)
    from conformance.suite.profilecheck import plan

    sc = REGISTRY["attach-before-bind"]
    without = _profile()
    assert profile_gap(sc, without) is None  # the scenario runs (IMP-1)
    assert "fabricProbe" in (profile_gap(sc, without, "IMP-2") or "")
    assert profile_gap(sc, _profile(fabricProbe={"url": "http://127.0.0.1:1/a"}), "IMP-2") is None
    rows = {r.requirement: r for r in plan(without)}
    assert rows["IMP-2"].action == rows["IMP-3"].action == "skip"
    assert rows["IMP-1"].action == "run"
