"""`profile check --probe-url`: the probe's answer against the profile and the pools (the model rule of
observe/invariants.py: free[].model must be the pools' modelAttribute value). A real HTTP server on 127.0.0.1 plays
the probe; the pools are ResourceSlice documents as the API returns them (no cluster here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from json_server import serving

from conformance.cli import main
from conformance.implementation.profile import load_profile
from conformance.suite.probecheck import probe_problems

COUNTED = Path(__file__).resolve().parent.parent / "fixtures" / "profiles" / "reference-counted.yaml"
FREE = {"fabric": "fabric-0", "free": 3, "total": 4, "nodes": ["node-0"]}


def _entry_slice(model: str) -> dict[str, Any]:
    device = {
        "name": "entry-0",
        "attributes": {"model": {"string": model}},
        "bindsToNode": True,
        "bindingConditions": ["gpu.fabric.example.com/attached"],
        "bindingFailureConditions": ["gpu.fabric.example.com/reschedule"],
    }
    return {"spec": {"driver": "gpu.fabric.example.com", "allNodes": True, "devices": [device]}}


def test_the_reference_models_agree() -> None:
    prof = load_profile(COUNTED).profile
    body = {"attachments": [], "free": [FREE | {"model": "fake-gpu"}, FREE | {"model": "fake-accel"}]}
    errors, notes = probe_problems(prof, body, [_entry_slice("fake-gpu"), _entry_slice("fake-accel")])
    assert errors == [] and any("fake-gpu" in n for n in notes)


def test_a_probe_model_that_is_not_the_pools_value_is_named() -> None:
    prof = load_profile(COUNTED).profile
    body = {"attachments": [], "free": [FREE | {"model": "A100"}]}
    errors, _ = probe_problems(prof, body, [_entry_slice("nvidia-a100")])
    text = "\n".join(errors)
    assert (
        "perModel names ['fake-accel', 'fake-gpu']" in text and "fabric entries carry model ['nvidia-a100']" in text
    ), text


def test_counted_entries_need_the_free_counts_and_the_shape_is_checked() -> None:
    prof = load_profile(COUNTED).profile
    assert "needs the probe's free[]" in probe_problems(prof, {"attachments": []}, None)[0][0]
    errors, _ = probe_problems(prof, {"attachments": [{"device": "x"}], "free": [{"model": "fake-gpu"}]}, None)
    assert any("attachments[0]: needs device and node" in e for e in errors)
    assert any("free[0]: lacks ['fabric', 'free', 'total', 'nodes']" in e for e in errors)


@pytest.fixture
def probe() -> Iterator[str]:
    answer = {"attachments": [], "free": [FREE | {"model": "A100"}]}
    with serving(lambda _request: answer) as port:
        yield f"http://127.0.0.1:{port}/v1/attachments"


def test_profile_check_asks_a_running_probe(probe: str) -> None:
    result = CliRunner().invoke(main, ["profile", "check", str(COUNTED), "--probe-url", probe])
    assert result.exit_code == 1, result.output
    assert "probe: the probe's free[].model values: ['A100']" in result.output
    assert "perModel names ['fake-accel', 'fake-gpu']" in result.output
