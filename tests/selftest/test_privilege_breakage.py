"""IMP-9 on stacks holding rights beyond the KEP's minimum: the reference stack (and its split variant, one
ServiceAccount per role) with one extra grant applied among its manifests. Each test runs the real suite's
least-privilege scenario in a subprocess against its own local cluster and reads IMP-9's reason from
conformance-report.yaml: its first line names the account and the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from selftest.suite_runner import ROOT, profile_variant, run_suite

TARGET = "conformance/suite/implementation/test_privilege.py"
OWN_SLICES = "own-slices.yaml\"  # the stack writes only its driver's slices\n"
RBAC = "rbac.authorization.k8s.io"
NODES_PATCH = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}


def _grant(tmp_path: Path, account: str, rule: dict[str, Any], namespace: str | None = None) -> Path:
    """A ClusterRole (or, in `namespace`, a Role) with `rule`, bound to the ServiceAccount `account` (ns/name)."""
    sa_ns, sa_name = account.split("/")
    kind = "Role" if namespace else "ClusterRole"
    where = {"namespace": namespace} if namespace else {}
    docs = [
        {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": {"name": "imp9-extra", **where}, "rules": [rule]},
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": f"{kind}Binding",
            "metadata": {"name": "imp9-extra", **where},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": "imp9-extra"},
            "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_ns}],
        },
    ]
    path = tmp_path / "extra-rights.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _with(tmp_path: Path, extra: Path, source: str = "reference.yaml", rights: str = "") -> Path:
    profile = profile_variant(tmp_path, OWN_SLICES, f'{OWN_SLICES}  - "{extra}"\n', source)
    if rights:
        text = profile.read_text()
        profile.write_text(text.replace("rights:\n", f"rights:\n{rights}", 1))
    return profile


def _imp9(tmp_path: Path, profile: Path) -> tuple[int, str, dict[str, str], dict[str, Any]]:
    reports = tmp_path / "reports"
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), f"--reports-dir={reports}", target=TARGET
    )
    report = yaml.safe_load((reports / "conformance-report.yaml").read_text())
    return code, out, outcomes, report["requirements"]["IMP-9"]


def _caught(tmp_path: Path, profile: Path, *named: str) -> None:
    code, out, outcomes, imp9 = _imp9(tmp_path, profile)
    assert code == 1, f"expected IMP-9 to fail (exit 1), got {code}:\n{out[-3000:]}"
    assert outcomes["test_no_rights_beyond_the_minimum"] == "failure", outcomes
    first = imp9["reason"].splitlines()[0]
    assert imp9["outcome"] == "failed" and all(n in first for n in named), first


def test_an_extra_cluster_wide_right_fails_naming_the_account_and_the_rule(tmp_path: Path) -> None:
    account = "dra-fabric-system/reference-controller"
    profile = _with(tmp_path, _grant(tmp_path, account, NODES_PATCH))
    _caught(tmp_path, profile, account, "patch core/nodes (cluster-wide; rule verbs [patch]", "ClusterRole imp9-extra")


def test_an_extra_namespaced_right_fails_naming_the_namespace(tmp_path: Path) -> None:
    account = "dra-fabric-system/reference-controller"
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    profile = _with(tmp_path, _grant(tmp_path, account, secrets, namespace="dra-fabric-system"))
    _caught(tmp_path, profile, account, "get core/secrets (in namespace dra-fabric-system", "Role imp9-extra")


def test_the_same_right_declared_with_a_reason_passes_and_is_printed(tmp_path: Path) -> None:
    account = "dra-fabric-system/reference-controller"
    declared = (
        f"  - {{account: {account}, verbs: [patch], resource: nodes, "
        "reason: labels the node its fabric pools select on}\n"
    )
    profile = _with(tmp_path, _grant(tmp_path, account, NODES_PATCH), rights=declared)
    code, out, _, imp9 = _imp9(tmp_path, profile)
    assert code == 0, f"expected IMP-9 to pass with the right declared, got {code}:\n{out[-3000:]}"
    assert imp9["outcome"] == "passed", imp9
    assert "patch core/nodes (labels the node its fabric pools select on)" in imp9["reason"], imp9["reason"]
    html = (tmp_path / "reports" / "report.html").read_text()
    assert "labels the node its fabric pools select on" in html


def test_a_second_account_of_a_split_stack_is_judged_too(tmp_path: Path) -> None:
    """The old IMP-9 judged controller.serviceAccount only: here the condition writer (not the controller process)
    may delete pods and evict them."""
    account = "dra-fabric-system/condition-writer"
    pods = {"apiGroups": [""], "resources": ["pods", "pods/eviction"], "verbs": ["create", "delete"]}
    profile = _with(tmp_path, _grant(tmp_path, account, pods), source="reference-roles.yaml")
    _caught(tmp_path, profile, account, "delete core/pods", "create core/pods/eviction")


def test_writes_to_other_drivers_slices_fail_without_the_admission_policy(tmp_path: Path) -> None:
    """RBAC lets a pool publisher write every driver's slices; without own-slices.yaml the dry-run writes of another
    driver's slice are admitted."""
    line = f'  - "{ROOT / "fixtures" / "profiles"}/../../fake-drivers/deploy/{OWN_SLICES}'
    profile = profile_variant(tmp_path, line, "")
    _caught(tmp_path, profile, "dra-fabric-system/reference-controller", "ResourceSlices of another driver")
