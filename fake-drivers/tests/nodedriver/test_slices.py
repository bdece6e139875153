"""The node driver's policy as pure functions (no cluster): what each node's slice holds."""

from __future__ import annotations

import pytest

from fake_drivers.dra import identity
from fake_drivers.nodedriver.config import build_config
from fake_drivers.nodedriver.slices import AttachedDevice, Policy, desired_devices, node_template
from fake_drivers.validation import ConfigError

CONFIG = build_config({"nodes": {"node-0": {"local": [{"model": "fake-gpu", "count": 2}]}, "node-1": {}}})
HOT = AttachedDevice("fabric-0-fake-gpu-0", "u-hot", "fake-gpu", {"memoryGiB": 80, "vendor": "x"}, node="node-0")
ELSEWHERE = AttachedDevice("fabric-1-fake-gpu-3", "u-other", "fake-gpu", {}, node="node-1")


def names(devices: list[dict]) -> list[str]:
    return [d["name"] for d in devices]


def test_local_devices_have_stable_identity_and_model() -> None:
    devices = desired_devices(CONFIG, "node-0", [], set(), Policy())
    assert names(devices) == ["local-fake-gpu-0", "local-fake-gpu-1"]
    again = desired_devices(
        build_config({"nodes": {"node-0": {"local": [{"model": "fake-gpu", "count": 2}]}}}),
        "node-0",
        [],
        set(),
        Policy(),
    )
    assert [identity(d) for d in devices] == [identity(d) for d in again]
    assert devices[0]["attributes"]["model"] == {"string": "fake-gpu"}


def test_republish_adds_hot_plugged_device_with_fabric_identity_and_typed_attributes() -> None:
    devices = desired_devices(CONFIG, "node-0", [HOT, ELSEWHERE], set(), Policy(republish=True))
    hot = next(d for d in devices if d["name"] == HOT.name)
    assert hot["attributes"] == {
        "uuid": {"string": "u-hot"},
        "model": {"string": "fake-gpu"},
        "memoryGiB": {"int": 80},
        "vendor": {"string": "x"},
    }
    assert ELSEWHERE.name not in names(devices)


def test_no_republish_keeps_only_local_devices() -> None:
    assert names(desired_devices(CONFIG, "node-0", [HOT], set(), Policy(republish=False))) == [
        "local-fake-gpu-0",
        "local-fake-gpu-1",
    ]


def test_deny_list_hides_devices_the_fabric_pool_still_offers() -> None:
    policy = Policy(republish=True, deny_list=True)
    assert HOT.name not in names(desired_devices(CONFIG, "node-0", [HOT], {"u-hot"}, policy))
    assert HOT.name in names(desired_devices(CONFIG, "node-0", [HOT], {"u-unrelated"}, policy))


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"nodes": {}}, "nodes"),
        ({"nodes": {"Node_0": {}}}, "nodes"),
        ({"nodes": {"node-0": {"local": [{"model": "fake-gpu", "cont": 1}]}}}, "cont"),
        ({"nodes": {"node-0": {"local": [{"model": "x", "attributes": {"uuid": "a"}}]}}}, "uuid"),
        ({"driver": "Not A Driver", "nodes": {"node-0": {}}}, "driver"),
    ],
)
def test_bad_config_names_the_field(raw: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        build_config(raw)


def test_a_per_node_plugins_slices_are_owned_by_its_node() -> None:
    """--node mode: the slices name the Node as their owner (the garbage collector removes them with it, as a kubelet
    plugin's are); the all-nodes driver's are not owned (it removes a deleted node's slices itself)."""
    owned = node_template("gpu.example.com", "node-3", "uid-3")
    assert owned["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "node-3", "uid": "uid-3", "controller": True}
    ]
    assert owned["spec"]["nodeName"] == "node-3"
    assert "ownerReferences" not in node_template("gpu.example.com", "node-3")["metadata"]
