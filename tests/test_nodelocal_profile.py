"""The reference node-local readiness-gate profile, and condition names without a prefix through the profile (the API
accepts them: the upstream dra-example-driver publishes `BindingConditions` / `BindingFailureConditions`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from conformance.implementation.profile import Users, load_profile
from conformance.suite.implementation import test_readiness  # noqa: F401  (registers its scenario)
from conformance.suite.implementation.nodecredentials import per_node_accounts
from conformance.suite.implementation.readiness import model_gap, probe_gap
from conformance.suite.scenario import REGISTRY, profile_gap

PROFILES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"


def test_the_reference_nodelocal_profile_declares_the_gate() -> None:
    prof = load_profile(PROFILES / "reference-nodelocal.yaml").profile
    assert prof.binding_model == "node-local" and model_gap(prof) is None and probe_gap(prof) is None
    assert per_node_accounts(prof) == {
        "dra-nodelocal-system/reference-node-readier": Users(central=[], per_node=["process node-readier"])
    }


def test_unprefixed_condition_names_load_through_a_node_local_profile(tmp_path: Path) -> None:
    raw = yaml.safe_load((PROFILES / "reference-nodelocal.yaml").read_text())
    raw["failureConditions"] = {"BindingFailureConditions": "failure"}
    raw["processes"][1]["command"] += ["--condition-prefix", "", "--failed-condition", "BindingFailureConditions"]
    path = tmp_path / "unprefixed.yaml"
    path.write_text(yaml.safe_dump(raw))
    prof = load_profile(path).profile
    assert prof.meaning("BindingFailureConditions") == "failure"


def test_without_a_readiness_probe_the_probe_judged_requirements_say_why(tmp_path: Path) -> None:
    raw = yaml.safe_load((PROFILES / "reference-nodelocal.yaml").read_text())
    del raw["readinessProbe"]
    path = tmp_path / "no-probe.yaml"
    path.write_text(yaml.safe_dump(raw))
    prof = load_profile(path).profile
    assert "declares no readinessProbe" in (probe_gap(prof) or "")
    gate = REGISTRY["readiness-gate"]
    assert "declares no readinessProbe" in (profile_gap(gate, prof, "RDY-3") or "")
    assert profile_gap(gate, prof, "RDY-1") is None


def test_a_fabric_profile_has_no_readiness_gate() -> None:
    assert "node-local" in (model_gap(load_profile(PROFILES / "reference.yaml").profile) or "")
