"""Requirements that do not apply to the profile's binding model: not run, reported `not-applicable` (neither passed
nor skipped), counted out of the verdict, which says so. The pytester runs are in-process pytest runs of a tiny suite
with requirement markers and no cluster; the plugin is the real one."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conformance.docs.requirement_reference import render
from conformance.implementation import profile as profile_module
from conformance.implementation.profile import API_VERSION, KIND, Profile, load_profile
from conformance.observe.publishing import count_shortfall, devices_published
from conformance.report.catalogue import APPLIES, BINDING_MODELS, CATALOGUE, FABRIC_MODELS, REQUIREMENTS
from conformance.report.outcomes import (
    Outcomes,
    RunResult,
    not_applicable,
    not_applicable_reason,
    not_shown,
    write_certification_junit,
)
from conformance.report.verdict import EXIT_PARTIAL, exit_status, judge, overall, verdicts
from conformance.suite.profilecheck import plan, suite_modules
from conformance.suite.scenario import REGISTRY

pytest_plugins = ["pytester"]

NODE_LOCAL = f"apiVersion: {API_VERSION}\nkind: {KIND}\nname: gate\nversion: '1'\ndriver: d\nbindingModel: node-local\n"
FABRIC_ONLY = sorted(rid for rid, a in APPLIES.items() if a.models == FABRIC_MODELS)


def test_the_catalogue_knows_the_profiles_binding_models() -> None:
    assert set(BINDING_MODELS) == set(profile_module.BINDING_MODELS)
    assert FABRIC_MODELS == profile_module.FABRIC_MODELS
    assert set(APPLIES) <= set(CATALOGUE)
    assert all(a.models <= set(BINDING_MODELS) and a.why for a in APPLIES.values())


def test_fabric_only_requirements_do_not_apply_to_node_local_and_the_rest_do() -> None:
    for rid in ("IMP-1", "IMP-2", "IMP-3", "IMP-5", "IMP-11", "NODE-3"):
        why = CATALOGUE[rid].not_applicable("node-local")
        assert why and why.startswith("fabric-only: bindingModel node-local has no fabric ("), rid
    for rid in ("IMP-9", "IMP-17", "SCALE-1", "NODE-1", "NODE-2", "API-1", "SCH-3"):
        assert CATALOGUE[rid].not_applicable("node-local") is None, rid
    for model in FABRIC_MODELS:
        assert all(r.not_applicable(model) is None for r in REQUIREMENTS if r.id in FABRIC_ONLY)
    assert all(r.not_applicable(None) is None for r in REQUIREMENTS)  # a run without a profile


def _summary(model: str | None) -> dict:
    outcomes = Outcomes()
    for req in REQUIREMENTS:
        if req.not_applicable(model) is None:
            outcomes.add(req.id, RunResult(f"t::{req.id}", "passed"))
    return outcomes.summary(model=model)


def test_summary_and_verdict_count_not_applicable_out_and_say_so() -> None:
    summary = _summary("node-local")
    assert summary["IMP-2"]["outcome"] == "not-applicable"
    assert summary["IMP-2"]["reason"].startswith("fabric-only: bindingModel node-local has no fabric")
    assert summary["IMP-9"]["outcome"] == "passed"
    found = verdicts(summary, model="node-local")
    impl = found["implementation"]
    assert impl.result == "success" and overall(found) == "success"
    n = len([r for r in FABRIC_ONLY if CATALOGUE[r].area in ("implementation", "scale")])
    assert impl.shown == f"success ({n} requirements not applicable to bindingModel node-local)"
    assert impl.counts["not-applicable"] == n
    assert impl.as_dict()["notApplicable"] == {"bindingModel": "node-local", "requirements": impl.not_applicable}
    assert any("not applicable (counted out of the verdict): fabric-only" in r for r in impl.reasons)
    assert found["cluster"].shown == "success"  # no cluster requirement depends on the binding model
    assert exit_status(overall(found), 0, set()) == 0
    assert not [line for line in not_shown(summary) if "IMP-2" in line]  # not "not shown to pass"
    assert any(
        line.startswith("IMP-2    MUST   fabric-only: bindingModel node-local") for line in not_applicable(summary)
    )
    grouped = [r for r in impl.reasons if "not applicable" in r]
    assert len(grouped) == 1 and grouped[0].startswith("IMP-1, IMP-2, IMP-3")
    assert grouped[0].endswith(
        "not applicable (counted out of the verdict): fabric-only: bindingModel node-local has no fabric"
    )


def test_not_applicable_never_hides_a_failure_or_a_missing_must() -> None:
    summary = _summary("node-local")
    summary["IMP-17"] = {**summary["IMP-17"], "outcome": "skipped", "reason": "no other driver"}
    assert judge(summary, "implementation", model="node-local").result == "partial"
    summary["IMP-9"] = {**summary["IMP-9"], "outcome": "failed", "reason": "wrote another driver's claim"}
    found = judge(summary, "implementation", model="node-local")
    assert found.result == "failure" and found.shown.startswith("failure (")


def test_fabric_models_count_out_only_the_readiness_gates_requirements() -> None:
    summary = _summary("keep-in-pool")
    apart = sorted(rid for rid, e in summary.items() if e["outcome"] == "not-applicable")
    assert apart == sorted(rid for rid, a in APPLIES.items() if "keep-in-pool" not in a.models)
    assert all(rid.startswith("RDY-") for rid in apart)
    assert summary[apart[0]]["reason"].startswith("not applicable to bindingModel keep-in-pool: only to node-local (")
    found = judge(summary, "implementation", model="keep-in-pool")
    assert found.result == "success"
    assert found.shown == f"success ({len(apart)} requirements not applicable to bindingModel keep-in-pool)"


def test_certification_junit_marks_them_apart(tmp_path: Path) -> None:
    path = tmp_path / "cert.xml"
    write_certification_junit(path, _summary("node-local"), "s")
    case = next(c for c in ET.parse(path).iter("testcase") if c.get("name", "").startswith("IMP-2 "))
    assert case.get("status") == "not-applicable"
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith("not-applicable: fabric-only")
    passed = next(c for c in ET.parse(path).iter("testcase") if c.get("name", "").startswith("IMP-9 "))
    assert passed.find("skipped") is None and passed.get("status") is None


def test_a_skip_reason_tells_not_applicable_apart() -> None:
    assert not_applicable_reason("Skipped: not applicable: fabric-only: x") == "fabric-only: x"
    assert not_applicable_reason("the profile declares no faultInjector") is None


def test_profile_check_plans_them_not_applicable(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(NODE_LOCAL)
    rows = {r.requirement: r for r in plan(load_profile(tmp_path / "p.yaml").profile)}
    assert rows["IMP-2"].action == "not-applicable" and "has no fabric" in rows["IMP-2"].reason
    assert rows["SCALE-1"].action == "run" and rows["IMP-17"].action == "run"


def test_a_node_local_run_does_not_run_fabric_only_tests_and_succeeds(pytester: pytest.Pytester, tmp_path) -> None:
    """Every requirement has a test; the fabric-only ones would fail if run: they must not be."""
    tests = []
    for req in REQUIREMENTS:
        body = "assert False, 'ran'" if req.id in FABRIC_ONLY else "pass"
        tests.append(
            f"@pytest.mark.requirement({req.id!r})\ndef test_{req.id.lower().replace('-', '_')}():\n    {body}\n"
        )
    pytester.makepyfile(test_reqs="import pytest\n\n" + "\n".join(tests))
    profile = tmp_path / "nodelocal.yaml"
    profile.write_text(NODE_LOCAL)
    reports = tmp_path / "reports"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--profile={profile}", f"--reports-dir={reports}")
    n_impl = len([r for r in FABRIC_ONLY if CATALOGUE[r].area in ("implementation", "scale")])
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*NOT APPLICABLE to bindingModel node-local*",
            "IMP-1 *MUST*fabric-only: bindingModel node-local has no fabric (it judges the published fabric entries*",
            f"*implementation verdict: SUCCESS ({n_impl} requirements not applicable to bindingModel node-local)*",
            f"implementation: success ({n_impl} not applicable) · cluster: success · exit 0",
            f"*{len(FABRIC_ONLY)} not applicable*",
        ]
    )
    assert "failed" not in result.stdout.str().splitlines()[-1]
    report = yaml.safe_load((reports / "conformance-report.yaml").read_text())
    assert report["requirements"]["IMP-2"]["outcome"] == "not-applicable"
    assert report["totals"]["not-applicable"] == len(FABRIC_ONLY)
    assert report["verdicts"]["implementation"]["summary"].startswith("success (")
    junit = ET.parse(reports / "certification-junit.xml")
    assert sum(c.get("status") == "not-applicable" for c in junit.iter("testcase")) == len(FABRIC_ONLY)
    page = (reports / "report.html").read_text()
    assert "not applicable to bindingModel node-local" in page and 'class="not-applicable"' in page


def test_an_applicable_must_skipped_on_node_local_is_still_partial(pytester: pytest.Pytester, tmp_path) -> None:
    tests = [
        "@pytest.mark.requirement('IMP-2')\ndef test_a():\n    assert False\n",
        "@pytest.mark.requirement('IMP-17')\ndef test_b():\n    pytest.skip('no other driver')\n",
    ]
    pytester.makepyfile(test_reqs="import pytest\n\n" + "\n".join(tests))
    profile = tmp_path / "nodelocal.yaml"
    profile.write_text(NODE_LOCAL)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--profile={profile}")
    assert result.ret == EXIT_PARTIAL
    result.stdout.fnmatch_lines(["*IMP-17 MUST skipped*", "*1 skipped, 1 not applicable*"])


def _gated_slice(node: str, devices: int) -> dict:
    device = {"name": "d", "bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/failed"]}
    return {"spec": {"driver": "x", "pool": {"name": node}, "nodeName": node, "devices": [device] * devices}}


def test_a_node_local_profile_owes_its_gated_devices_and_no_fabric() -> None:
    """published.fabricDevices counts a readiness gate's node-local devices with conditions; no fabric is owed."""
    base = {"apiVersion": API_VERSION, "kind": KIND, "name": "p", "version": "1", "driver": "x"}
    prof = Profile.model_validate({**base, "bindingModel": "node-local", "published": {"fabricDevices": 6}})
    slices = [_gated_slice("node-0", 4), _gated_slice("node-1", 1)]
    assert count_shortfall(slices, prof) == ["5 of 6 node-local devices with binding conditions published"]
    assert devices_published(slices, prof) == (5, "node-local devices with binding conditions on 2 nodes")
    assert count_shortfall([*slices, _gated_slice("node-2", 1)], prof) == []
    fabric = Profile.model_validate({**base, "published": {"fabricDevices": 1}})
    assert count_shortfall(slices, fabric) == ["0 of 1 fabric devices published"]  # node-local copies are no fabric


def test_the_requirement_reference_says_where_each_requirement_applies() -> None:
    suite_modules()
    reqs = tuple(r for r in REQUIREMENTS if r.id in ("IMP-2", "IMP-17", "RDY-1") and r.doc is not None)
    page = render(reqs, list(REGISTRY.values()), {})
    assert "| [IMP-2](#imp-2) | MUST | implementation | keep-in-pool, reschedule-to-local |" in page
    assert "**Applies to.** bindingModel `keep-in-pool`, `reschedule-to-local` only; `not-applicable`" in page
    assert "| node-local readiness gate (no fabric) | not applicable: not run, counted out |" in page
    assert "**Applies to.** every binding model." in page
