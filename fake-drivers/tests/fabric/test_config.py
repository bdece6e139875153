"""Fabric YAML: the example loads, ids are stable, and bad configurations are refused with a clear message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from fabric_harness import TEST_FABRIC

from fake_drivers.fabric.config import ConfigError, build_config, device_uuid, load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fabric.yaml"


def test_example_config_has_two_fabrics_with_four_gpus_each() -> None:
    config = load_config(EXAMPLE)
    assert config.fabrics == {"fabric-0": ("node-0", "node-2"), "fabric-1": ("node-1", "node-3")}
    per_fabric = {fabric: [d for d in config.devices if d.fabric == fabric] for fabric in config.fabrics}
    assert {fabric: len(devices) for fabric, devices in per_fabric.items()} == {"fabric-0": 4, "fabric-1": 4}
    assert {device.model for device in config.devices} == {"fake-gpu"}
    assert config.attach_seconds == 1.0
    assert config.detach_seconds == 1.0


def test_device_ids_are_deterministic_and_distinct() -> None:
    first = build_config(TEST_FABRIC)
    second = build_config(copy.deepcopy(TEST_FABRIC))
    assert [d.uuid for d in first.devices] == [d.uuid for d in second.devices]
    assert len({d.uuid for d in first.devices}) == len(first.devices) == 8
    # The id depends on fabric/model/index only, not on the order of the file or the attributes.
    assert first.devices[0].uuid == device_uuid("fabric-0", "fake-gpu", 0)
    assert first.devices[0].name == "fabric-0-fake-gpu-0"
    assert first.devices[0].attributes == {"vendor": "example.com", "memoryGiB": 80}


def _with(change: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(TEST_FABRIC)
    document["fabrics"][0].update(change)
    return document


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({**TEST_FABRIC, "atachSeconds": 1}, "atachSeconds"),  # typo of a known key
        ({**TEST_FABRIC, "attachSeconds": -1}, "attachSeconds"),
        ({"fabrics": []}, "fabrics"),
        (_with({"id": "Fabric_0"}), "DNS label"),
        (_with({"nodes": ["node-0", "node-0"]}), "unique"),
        (_with({"nodes": ["Node 0"]}), "DNS subdomain"),
        (_with({"devices": [{"model": "fake-gpu", "count": -1}]}), "count"),
        (_with({"devices": [{"model": "fake-gpu", "count": 1, "attributes": {"uuid": "x"}}]}), "reserved"),
        (_with({"devices": [{"model": "fake-gpu", "count": 1, "attributes": {"ratio": 0.5}}]}), "ratio"),
        (_with({"devices": [{"model": "gpu", "count": 1}, {"model": "gpu", "count": 2}]}), "once per fabric"),
        ({"fabrics": [TEST_FABRIC["fabrics"][0], TEST_FABRIC["fabrics"][0]]}, "fabric ids must be unique"),
        (_with({"id": "f" * 60}), "longer than 63"),
        ([1, 2], "mapping"),
    ],
)
def test_invalid_config_is_refused_with_the_offending_key(document: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        build_config(document)


def test_unreadable_and_non_yaml_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("fabrics: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_relative_database_path_is_resolved_next_to_the_config(tmp_path: Path) -> None:
    path = tmp_path / "fabric.yaml"
    path.write_text("database: state/fabric.db\nfabrics:\n- id: f\n  nodes: [n]\n")
    assert load_config(path).database == tmp_path / "state" / "fabric.db"
