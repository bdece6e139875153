"""Counting what an implementation published, for the device read's readiness (observe/publishing.py)."""

from conformance.implementation.profile import API_VERSION, KIND, Profile
from conformance.observe.publishing import fabric_counts


def _slice(node: str | None, models: list[str]) -> dict:
    devices = [
        {"name": f"d{i}", "bindingConditions": ["x/attached"], "attributes": {"model": {"string": m}}}
        for i, m in enumerate(models)
    ]
    spec = {"devices": devices, **({"nodeName": node} if node else {"nodeSelector": {}})}
    return {"metadata": {"name": f"s-{node}"}, "spec": spec}


def test_fabric_counts_skip_node_local_slices_and_count_per_model() -> None:
    slices = [_slice(None, ["a100", "a100", "h100"]), _slice("node-0", ["a100"])]
    total, per_model = fabric_counts(slices, "model")
    assert total == 3
    assert per_model == {"a100": 2, "h100": 1}


def test_a_declared_state_is_told_apart_from_the_default() -> None:
    base = {"apiVersion": API_VERSION, "kind": KIND, "name": "p", "version": "1", "driver": "d.example.com"}
    assert not Profile.model_validate(base).published.declared
    assert Profile.model_validate(base | {"published": {"fabricDevices": 8}}).published.declared
    assert Profile.model_validate(base | {"published": {"perModel": {"a100": 4}}}).published.declared
