"""The lifecycle run's parts that need no cluster: editing a component's command line, the release's runtime-config
and kube-scheduler's gate-off configuration, what GATE-1/2 and UPG-3 compare, how checks become requirement outcomes,
and the reports `dra-conformance review` merges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.providers.local.restart import CommandLine, kwokctl_lines
from conformance.cluster.toolchain.build import is_cached
from conformance.cluster.toolchain.cache import Cache
from conformance.cluster.versions import parse_version
from conformance.lifecycle.controlplane import _runtime_config, _scheduler_config
from conformance.lifecycle.ledger import Ledger
from conformance.lifecycle.report import write_reports
from conformance.lifecycle.snapshot import claim_key, differences, fields_lost, invariants, slice_fields
from conformance.lifecycle.world import allocated_node, conditions_true
from conformance.report.bundle import open_results
from conformance.report.catalogue import LIFECYCLE_REQUIREMENTS, SUITE_REQUIREMENTS


def test_lifecycle_requirements_are_not_a_suite_runs() -> None:
    ids = {r.id for r in LIFECYCLE_REQUIREMENTS}
    assert {"GATE-1", "GATE-2", "GATE-3", "UPG-1", "UPG-2", "UPG-3", "SKEW-1"} <= ids
    assert not ids & {r.id for r in SUITE_REQUIREMENTS}


def test_command_line_flags_are_replaced_added_and_removed_in_both_spellings() -> None:
    line = CommandLine("kube-apiserver", "/bin/a", ("--feature-gates=A=true", "--runtime-config", "x=true", "--v=2"))
    assert line.flag("feature-gates") == "A=true" and line.flag("runtime-config") == "x=true"
    edited = line.with_flag("feature-gates", "A=false").with_flag("runtime-config", None).with_flag("new", "1")
    assert edited.args == ("--v=2", "--feature-gates=A=false", "--new=1")
    assert edited.with_binary("/bin/b").binary == "/bin/b" and line.args[0] == "--feature-gates=A=true"


def test_kwokctl_lines_are_read_from_its_state(tmp_path: Path) -> None:
    config = {
        "kind": "KwokctlConfiguration",
        "components": [{"name": "kube-scheduler", "binary": "/s", "args": ["--config=/c.yaml"], "workDir": "/w"}],
    }
    (tmp_path / "kwok.yaml").write_text("---\n" + yaml.safe_dump({"kind": "Other"}) + "---\n" + yaml.safe_dump(config))
    assert kwokctl_lines(tmp_path)["kube-scheduler"] == CommandLine("kube-scheduler", "/s", ("--config=/c.yaml",), "/w")


def test_runtime_config_keeps_what_was_set_and_adds_what_the_release_needs() -> None:
    on_136 = _runtime_config("api/all=true", parse_version("1.36.3"))
    assert on_136 == "api/all=true,resource.k8s.io/v1beta2/devicetaintrules=true"
    assert _runtime_config(on_136, parse_version("1.37.2")) == on_136  # the 1.36 scheduler lists v1beta2 rules
    assert _runtime_config(None, parse_version("1.37.2")) is None


def test_scheduler_gate_off_config_drops_the_binding_timeout_and_gate_on_reads_the_original(tmp_path: Path) -> None:
    original = tmp_path / "scheduler.yaml"
    plugin = {"name": "DynamicResources", "args": {"bindingTimeout": "3600s"}}
    original.write_text(
        yaml.safe_dump({"profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [plugin]}]})
    )
    line = CommandLine("kube-scheduler", "/s", (f"--config={original}",))
    off = _scheduler_config(line, on=False)
    written = yaml.safe_load(Path(off.flag("config") or "").read_text())
    assert off.flag("config") != str(original) and "pluginConfig" not in written["profiles"][0]
    assert _scheduler_config(off, on=True).flag("config") == str(original)
    assert "bindingTimeout" in original.read_text()


def _claim(devices: list[str], node: str = "node-0", true: bool = False, extra: list[str] = ()) -> dict:
    results = [
        {"driver": "d", "pool": "fabric", "device": dev, "request": "dev", "bindingConditions": ["d/attached"]}
        for dev in devices
    ]
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    conditions = [{"type": "d/attached", "status": "True"}] if true else []
    return {
        "metadata": {"name": f"c-{'-'.join(devices)}"},
        "status": {
            "allocation": {"devices": {"results": results}, "nodeSelector": selector, "allocationTimestamp": "t"},
            "reservedFor": [{"uid": "u1"}],
            "devices": [
                {"driver": "d", "pool": "fabric", "device": dev, "conditions": conditions} for dev in [*devices, *extra]
            ],
        },
    }


def test_claim_key_sees_a_dropped_condition_and_nothing_else() -> None:
    before = _claim(["dev-0"], true=True)
    assert allocated_node(before) == "node-0" and conditions_true(before)
    after = _claim(["dev-0"], true=True)
    assert not differences(claim_key(before), claim_key(after))
    del after["status"]["allocation"]["devices"]["results"][0]["bindingConditions"]
    assert [d.split(":")[0] for d in differences(claim_key(before), claim_key(after))] == ["results"]
    assert not conditions_true(_claim(["dev-0"], true=False)) and claim_key(None) == {"claim": "gone"}


def test_slice_fields_lost_names_each_device() -> None:
    published = {"spec": {"devices": [{"name": "dev-0", "bindsToNode": True, "bindingConditions": ["a"]}]}}
    dropped = {"spec": {"devices": [{"name": "dev-0"}]}}
    assert fields_lost(slice_fields(published), slice_fields(published)) == []
    assert fields_lost(slice_fields(published), slice_fields(dropped))[0].startswith("dev-0: ")


def test_invariants_find_a_device_held_twice_a_stale_condition_and_a_lost_allocation() -> None:
    a, b = _claim(["dev-0"]), _claim(["dev-0"], extra=["dev-9"])
    b["metadata"]["name"] = "other"
    pod = {
        "metadata": {"uid": "u2"},
        "spec": {"nodeName": "node-0"},
        "status": {"resourceClaimStatuses": [{"resourceClaimName": "other"}]},
    }
    problems = invariants([a, b], {"p": pod})
    assert any("held by claims" in p for p in problems)
    assert any("dev-9, not allocated" in p for p in problems)
    assert any("bound pod p" in p for p in problems)
    assert invariants([_claim(["dev-0"])], {}) == []


def test_checks_become_outcomes_failed_first_then_stopped_then_passed(tmp_path: Path) -> None:
    ledger = Ledger("gates")
    ledger.check("GATE-1", "s1", True, "pod stays bound")
    ledger.check("GATE-2", "s1", True, "kept")
    ledger.check("GATE-2", "s2", False, "fabric slice lost fields")
    summary = ledger.summary()
    assert summary["GATE-1"]["outcome"] == "passed"
    assert summary["GATE-2"]["outcome"] == "failed" and summary["GATE-2"]["reason"].startswith("s2: fabric slice")
    assert summary["UPG-1"]["outcome"] == "not-covered"
    ledger.stopped = "timed out"
    assert ledger.summary()["GATE-3"]["outcome"] == "not-judged"
    assert ledger.summary()["GATE-1"]["outcome"] == "partial"
    ledger.find("PRR-6", "proceed to binding", "new pod: unschedulable", agrees=False)
    bundle, result = write_reports(tmp_path / "r", ledger, {"kubernetes": "1.37.2", "provider": "local"}, None)
    assert result == "failure"
    folder, tmp = open_results(bundle)
    try:
        report = yaml.safe_load((folder / "conformance-report.yaml").read_text())
    finally:
        if tmp is not None:
            tmp.cleanup()
    assert set(report["requirements"]) == {"GATE-1", "GATE-2", "GATE-3"}
    assert report["cluster"]["kubernetes"] == "1.37.2"
    assert report["lifecycle"]["findings"][0]["agrees"] is False
    assert "**differs**" in (tmp_path / "r" / "lifecycle.md").read_text()


def test_is_cached_reads_the_cache_for_the_release(tmp_path: Path) -> None:
    assert is_cached(parse_version("1.36.3"), Cache(tmp_path)) is False


def test_gates_on_a_release_whose_gate_is_locked_are_not_applicable_and_start_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from conformance.cli import main

    out = tmp_path / "gates"
    result = CliRunner().invoke(main, ["lifecycle", "gates", "--k8s-version", "1.38.0-beta.0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "lifecycle gates on 1.38.0-beta.0: not applicable: Kubernetes 1.38.0-beta.0: DRADeviceBindingConditions" in (
        result.output
    )
    report = yaml.safe_load((out / "conformance-report.yaml").read_text())
    outcomes = {rid: e["outcome"] for rid, e in report["requirements"].items()}
    assert outcomes == {"GATE-1": "not-applicable", "GATE-2": "not-applicable", "GATE-3": "not-applicable"}
    assert "locked on" in report["lifecycle"]["notApplicable"] and report["lifecycle"]["steps"] == []
    # The KEP's PRR answer (written for beta) beside the binaries: on 1.38 the feature cannot be disabled.
    [finding] = report["lifecycle"]["findings"]
    assert finding["question"] == "PRR-2" and not finding["agrees"] and "locked on" in finding["measured"]
    assert (out / "results.tar.gz").exists()


def test_a_pod_the_scheduler_fails_with_an_error_is_a_decision_not_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """PodScheduled=False with reason SchedulerError (a plugin failed, e.g. a write the server refused; the pod is
    retried) is what the scheduler decided, printed beside the KEP; only a pod with no PodScheduled verdict is pending.
    World's reads are replaced by fixed objects (no cluster)."""
    from conformance.lifecycle.world import PENDING, SCHEDULER_ERROR, UNSCHEDULABLE, World

    def pod(reason: str | None) -> dict[str, Any]:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": reason, "message": "m"}] if reason else []
        return {"metadata": {"uid": "u"}, "spec": {}, "status": {"conditions": conditions}}

    world = World.__new__(World)
    monkeypatch.setattr(World, "claim_of", lambda self, p: None)
    for reason, state in (("SchedulerError", SCHEDULER_ERROR), ("Unschedulable", UNSCHEDULABLE), (None, PENDING)):
        served = pod(reason)
        monkeypatch.setattr(World, "read_pod", lambda self, name, served=served: served)
        assert world.fate("p").state == state


class _StoppedPlane:
    """A stand-in for ControlPlane (no cluster): its procedure stops at once; its components logged in `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self.release: dict[str, str] = {}
        self.workdir = workdir
        self.stopped = False

    def start(self) -> None:
        from conformance.lifecycle.gates import Stop

        raise Stop("new pod got no scheduling verdict in 60 s")

    def stop(self) -> None:
        self.stopped = True


def test_a_stopped_run_keeps_the_component_logs_in_its_bundle(tmp_path: Path) -> None:
    from conformance.lifecycle.run import _drive

    logs = tmp_path / "cluster" / "kwok" / "clusters" / "c" / "logs"
    logs.mkdir(parents=True)
    (logs / "kube-scheduler.log").write_text("--- restarted by dra-conformance: gate off ---\nE0101 failed\n")
    plane, ledger, out = _StoppedPlane(tmp_path / "cluster"), Ledger("gates"), tmp_path / "r"
    _drive(plane, ledger, out, lambda _: None, lambda world: None)  # type: ignore[arg-type]
    assert plane.stopped and ledger.stopped == "new pod got no scheduling verdict in 60 s"
    assert ledger.logs == ["artefacts/control-plane/kwok/clusters/c/logs/kube-scheduler.log"]
    bundle, _ = write_reports(out, ledger, {"kubernetes": "1.35.4", "provider": "local"}, None)
    folder, tmp = open_results(bundle)
    try:
        assert "E0101 failed" in (folder / ledger.logs[0]).read_text()
        assert yaml.safe_load((folder / "conformance-report.yaml").read_text())["lifecycle"]["logs"] == ledger.logs
    finally:
        if tmp is not None:
            tmp.cleanup()
    assert f"[{ledger.logs[0]}]" in (out / "lifecycle.md").read_text()


def test_a_pending_pod_says_which_step_has_not_happened() -> None:
    from conformance.lifecycle.world import _pending_detail

    pod: dict[str, Any] = {"status": {}}
    assert _pending_detail(pod, None, None).startswith("no ResourceClaim made from its template yet")
    assert _pending_detail(pod, "c", None).startswith("its claim c not found")
    assert _pending_detail(pod, "c", {"status": {}}) == "its claim c not allocated; no PodScheduled condition"
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Waiting", "message": "m"}]
    allocated = {"status": {"allocation": {"devices": {"results": []}}}}
    assert (
        _pending_detail(pod, "c", allocated)
        == "its claim c allocated, not reserved for it; PodScheduled False Waiting m"
    )
