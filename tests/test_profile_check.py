"""`dra-conformance profile check` and `profile init`: problems found before any cluster work, and a plan that
says per requirement what a run will do with the profile (no cluster is used here)."""

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conformance.cli import main
from conformance.implementation.profile import SCHEMA_FILE, TEMPLATE_FILE, ProfileError, json_schema, load_profile
from conformance.report.catalogue import SUITE_REQUIREMENTS
from conformance.suite.profilecheck import check, plan
from conformance.suite.scenario import known_capabilities

PROFILES = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "profiles").glob("*.yaml"))


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_every_reference_profile_checks_clean(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What `dra-conformance implementation up` writes to its state folder's env (reference-external.yaml uses it).
    monkeypatch.setenv("FABRIC_MANAGER_URL", "http://127.0.0.1:8790")
    monkeypatch.setenv("DRA_CONFORMANCE_STATE", "/tmp/state")
    result = check(load_profile(path))
    assert result.errors == []
    assert [r.requirement for r in result.plan] == [r.id for r in SUITE_REQUIREMENTS]


def test_the_external_profile_needs_the_environment_of_implementation_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FABRIC_MANAGER_URL", raising=False)
    monkeypatch.delenv("DRA_CONFORMANCE_STATE", raising=False)
    [external] = [p for p in PROFILES if p.name == "reference-external.yaml"]
    errors = check(load_profile(external)).errors
    assert any("$FABRIC_MANAGER_URL is not set" in e for e in errors), errors
    assert any("$DRA_CONFORMANCE_STATE is not set" in e for e in errors), errors


def test_the_published_schema_is_the_schema_of_the_code() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == json_schema(), (
        f"regenerate it: dra-conformance profile schema > {SCHEMA_FILE}"
    )


def test_a_profile_without_apiversion_is_refused_with_what_to_write(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\nversion: '1'\ndriver: d\n")
    with pytest.raises(ProfileError, match=r"apiVersion: dra-conformance\.example\.com/v1alpha1"):
        load_profile(path)


def test_init_writes_a_template_that_loads_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    runner = CliRunner()
    assert runner.invoke(main, ["profile", "init", "--out", str(out)]).exit_code == 0
    assert out.read_text() == TEMPLATE_FILE.read_text()
    assert check(load_profile(out)).errors == []
    again = runner.invoke(main, ["profile", "init", "--out", str(out)])
    assert again.exit_code == 1 and "--force" in again.output


def _variant(tmp_path: Path, **changes: object) -> Path:
    doc = yaml.safe_load(TEMPLATE_FILE.read_text())
    doc.update(changes)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_check_finds_placeholders_files_and_names(tmp_path: Path) -> None:
    path = _variant(
        tmp_path,
        manifests=["{profile_dir}/missing.yaml"],
        processes=[
            {"name": "ctl", "command": ["x", "{url:fm}", "{nope}"]},
            {"name": "fm", "command": ["y", "--port-file", "{port_file}"], "portFile": True},
        ],
    )
    errors = check(load_profile(path)).errors
    text = "\n".join(errors)
    assert "missing.yaml" in text
    assert "{url:fm} needs an earlier process 'fm'" in text
    assert "{nope}: unknown placeholder" in text
    result = CliRunner().invoke(main, ["profile", "check", str(path)])
    assert result.exit_code == 1 and "problem(s)" in result.output


def test_plan_says_why_a_requirement_is_skipped(tmp_path: Path) -> None:
    prof = load_profile(_variant(tmp_path)).profile  # the template: no probe, no fault injector, no capabilities
    rows = {r.requirement: r for r in plan(prof)}
    assert rows["SCH-3"].action == "run" and "certifies the cluster" in rows["SCH-3"].reason
    skipped = {r.requirement: r.reason for r in rows.values() if r.action == "skip"}
    assert any("fabricProbe" in reason for reason in skipped.values()), skipped
    assert any("capabilities" in reason for reason in skipped.values()), skipped
    cluster_only = {r.requirement: r for r in plan(None)}
    assert cluster_only["IMP-2"].action == "skip" and "no implementation profile" in cluster_only["IMP-2"].reason
    assert cluster_only["SCH-1"].action == "run"
    assert "controller.serviceAccount" in skipped["IMP-9"]


def _schema_keys(node: object) -> set[str]:
    """Every property name of the profile's JSON Schema, at any depth."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                found |= set(value)
            found |= _schema_keys(value)
    elif isinstance(node, list):
        for item in node:
            found |= _schema_keys(item)
    return found


def test_init_full_writes_every_field_of_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "full.yaml"
    assert CliRunner().invoke(main, ["profile", "init", "--full", "--out", str(out)]).exit_code == 0
    text = out.read_text()
    missing = sorted(key for key in _schema_keys(json_schema()) if f"{key}:" not in text)
    assert missing == [], f"profile init --full lacks {missing}"
    loaded = load_profile(out)
    assert loaded.profile.hooks.node == [] and any(p.per_node for p in loaded.profile.processes)
    assert check(loaded).errors == []


def test_a_capability_no_scenario_reads_is_refused_and_every_declared_one_selects_a_scenario(tmp_path: Path) -> None:
    path = _variant(tmp_path, capabilities={"hotplugRepublish": True, "sharedClaims": True})
    errors = check(load_profile(path)).errors
    assert any(e.startswith("capabilities.hotplugRepublish: no scenario reads it") for e in errors), errors
    assert not any("sharedClaims" in e.split(":")[0] for e in errors), errors
    for profile in sorted((Path(__file__).parents[1] / "fixtures" / "profiles").glob("reference*.yaml")):
        claimed = set(load_profile(profile).profile.capabilities)
        assert claimed <= known_capabilities(), f"{profile.name} claims {claimed - known_capabilities()}"


def test_the_check_ends_with_the_verdict_and_exit_status_the_run_would_get(tmp_path: Path) -> None:
    """The short template declares no probes: the run would be partial (exit 6), and the check names each MUST that
    makes it so; a node-local profile without a readinessProbe: RDY-3 and RDY-4."""
    out = tmp_path / "p.yaml"
    assert CliRunner().invoke(main, ["profile", "init", "--out", str(out)]).exit_code == 0
    lines = CliRunner().invoke(main, ["profile", "check", str(out)]).output.splitlines()
    assert lines[-1].startswith("if every requirement that runs passes, the run ends: implementation: partial (")
    assert lines[-1].endswith(" · cluster: success · exit 6 (--accept partial: exit 0)")
    assert "  IMP-2 skip: attach-before-bind: the profile declares no fabricProbe" in "\n".join(lines)
    raw = yaml.safe_load((PROFILES[0].parent / "reference-nodelocal.yaml").read_text())
    raw.pop("readinessProbe")
    result = check(load_profile(_write(tmp_path / "nl.yaml", raw)))
    musts = [line.split()[0] for line in result.verdict if line.startswith("  ")]
    assert musts == ["RDY-3", "RDY-4"], result.verdict
    assert result.verdict[-1].endswith(
        "implementation: partial (RDY-3, RDY-4 not shown to pass) · cluster: success "
        "· exit 6 (--accept partial: exit 0)"
    )


def _write(path: Path, raw: dict) -> Path:
    text = yaml.safe_dump(raw).replace("{profile_dir}", str(PROFILES[0].parent))
    path.write_text(text)
    return path
