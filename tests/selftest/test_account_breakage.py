"""Stacks described as a chart ships them, each broken the way issue 36 found real ones (items 4, 5, 7): a central
writer without the right to write claims of every node; one ServiceAccount for a central writer and the per-node
daemons, without that right and with it; a stack that declares it never sets its failure conditions and has no fault
injector. Each runs the real suite on its own local cluster, with only the modules concerned selected, and reads the
requirements' first lines from conformance-report.yaml: each names the cause, never a wait's timeout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from selftest.suite_runner import ROOT, profile_variant, run_suite

IMPL = "conformance/suite/implementation"
PROFILES = ROOT / "fixtures" / "profiles"
DEPLOY = ROOT / "fake-drivers" / "deploy"
NODELOCAL = "reference-nodelocal.yaml"
READIER = "dra-nodelocal-system/reference-node-readier"
NODE_VERBS = 'verbs: ["associated-node:update", "associated-node:patch"]'
CENTRAL_VERBS = (
    'verbs: ["associated-node:update", "associated-node:patch", "arbitrary-node:update", "arbitrary-node:patch"]'
)


def _broken(tmp_path: Path, name: str, old: str, new: str) -> tuple[str, str]:
    """A copy of fake-drivers/deploy/NAME with `old` replaced by `new`: (the path a variant's profile applies, the
    copy's path)."""
    text = (DEPLOY / name).read_text()
    assert old in text, f"{DEPLOY / name} no longer holds {old!r}; update this selftest"
    copy = tmp_path / f"broken-{name}"
    copy.write_text(text.replace(old, new))
    return f"{PROFILES}/../../fake-drivers/deploy/{name}", str(copy)


def _run(tmp_path: Path, profile: Path, *modules: str) -> tuple[int, str, dict[str, Any]]:
    reports = tmp_path / "reports"
    first, *more = (f"{IMPL}/{m}" for m in modules)  # the suite's target, then the other modules selected
    code, out, _ = run_suite(
        tmp_path / "junit.xml", f"--profile={profile}", f"--reports-dir={reports}", *more, target=first
    )
    report = yaml.safe_load((reports / "conformance-report.yaml").read_text())
    return code, out, report["requirements"]


def _first(requirements: dict[str, Any], rid: str, outcome: str, out: str) -> str:
    entry = requirements[rid]
    assert entry["outcome"] == outcome, f"{rid}: expected {outcome}, got {entry}\n{out[-3000:]}"
    first = entry["reason"].splitlines()[0].removeprefix("AssertionError: ")  # an assert's message as it reads
    assert "timed out" not in first and "nothing observed" not in first, f"{rid}: a wait's symptom: {first}"
    return first


def _shared(tmp_path: Path) -> Path:
    """reference-nodelocal.yaml whose readiness daemons' account also serves a central controller (as the upstream
    example driver's chart runs its controller Deployment and its DaemonSet under one ServiceAccount)."""
    entry = f"serviceAccounts:\n  - {{account: {READIER}, role: controller}}\nroles:\n"
    return profile_variant(tmp_path, "roles:\n", entry, NODELOCAL)


def test_a_central_writer_lacking_arbitrary_node_fails_imp9_naming_the_right(tmp_path: Path) -> None:
    """The reference controller as the example chart ships its controller: a Deployment's pod-bound token (a pod the
    scheduler places) and associated-node:update only."""
    rbac = _broken(tmp_path, "rbac.yaml", 'verbs: ["arbitrary-node:update"]', 'verbs: ["associated-node:update"]')
    profile = profile_variant(tmp_path, *rbac)
    text = profile.read_text()
    token = "{sa_kubeconfig:dra-fabric-system/reference-controller}"
    assert token in text, "reference.yaml's controller changed; update this selftest"
    profile.write_text(text.replace(token, token.replace("sa_kubeconfig", "pod_kubeconfig")))
    code, out, requirements = _run(tmp_path, profile, "test_privilege.py")
    assert code == 1, f"expected IMP-9 to fail (exit 1), got {code}:\n{out[-3000:]}"
    first = _first(requirements, "IMP-9", "failed", out)
    controller = "dra-fabric-system/reference-controller (controller, process controller)"
    assert first.startswith(f"{controller}, a central writer"), first
    assert "lacks resourceclaims/driver arbitrary-node:update (resourceNames [gpu.fabric.example.com])" in first, first
    assert "was placed by the scheduler on node" in out, "the run says where the controller's token pod landed"


def test_a_central_writer_lacking_arbitrary_node_fails_imp2_quoting_the_api_servers_refusals(tmp_path: Path) -> None:
    """The same controller with its ServiceAccount's unbound token: every condition write is refused (422) and the pod
    is never bound. IMP-2's first line is what the record and the audit log say (issue 36 item 3), not the wait."""
    rbac = _broken(tmp_path, "rbac.yaml", 'verbs: ["arbitrary-node:update"]', 'verbs: ["associated-node:update"]')
    code, out, requirements = _run(tmp_path, profile_variant(tmp_path, *rbac), "test_attach_before_bind.py")
    assert code == 1, f"expected IMP-2 to fail (exit 1), got {code}:\n{out[-3000:]}"
    first = _first(requirements, "IMP-2", "failed", out)
    assert re.search(r"^claim attach-before-bind-\S+ allocated (once|\d+ times) on node-\d+", first), first
    assert "never written; status.devices written by nobody" in first, first
    refused = re.search(
        r"update resourceclaims/driver arbitrary-node refused (once|\d+ times) for "
        r"dra-fabric-system/reference-controller \(422\)$",
        first,
    )
    assert refused, first
    reason = requirements["IMP-2"]["reason"]
    assert "\nthe wait that ran out: timed out after" in reason, reason[:2000]
    assert "\nthe implementation's log lines about this scenario" in reason, reason[:4000]


def test_one_account_for_a_central_writer_and_per_node_daemons_without_the_right_fails_imp9(tmp_path: Path) -> None:
    code, out, requirements = _run(tmp_path, _shared(tmp_path), "test_privilege.py", "test_readiness_privilege.py")
    assert code == 1, f"expected IMP-9 to fail (exit 1), got {code}:\n{out[-3000:]}"
    first = _first(requirements, "IMP-9", "failed", out)
    assert first.startswith(
        f"one account {READIER} serves a central writer (controller) and per-node daemons (process node-readier): "
        "both cannot hold: the central writer lacks resourceclaims/driver arbitrary-node:update, arbitrary-node:patch"
    ), first
    assert requirements["RDY-8"]["outcome"] == "passed", requirements["RDY-8"]


def test_one_account_for_both_with_the_right_fails_rdy8_as_every_nodes_daemon_holds_it(tmp_path: Path) -> None:
    profile = _shared(tmp_path)
    original, copy = _broken(tmp_path, "readier-rbac.yaml", NODE_VERBS, CENTRAL_VERBS)
    text = profile.read_text()
    assert original in text, f"{NODELOCAL} no longer applies {original}"
    profile.write_text(text.replace(original, copy))
    code, out, requirements = _run(tmp_path, profile, "test_privilege.py", "test_readiness_privilege.py")
    assert code == 1, f"expected RDY-8 to fail (exit 1), got {code}:\n{out[-3000:]}"
    first = _first(requirements, "RDY-8", "failed", out)
    assert first.startswith(f"one account {READIER} serves a central writer (controller) and per-node daemons"), first
    assert "both cannot hold: the account holds resourceclaims/driver arbitrary-node:update" in first, first
    assert requirements["IMP-9"]["outcome"] == "passed", requirements["IMP-9"]


def test_a_stack_declaring_it_never_reports_failures_fails_rdy5_citing_it(tmp_path: Path) -> None:
    """No fault injector either: RDY-5 fails on the declaration, RDY-6 still runs its before-readying step."""
    profile = profile_variant(tmp_path, "  attachFailureReporting: true\n", "", NODELOCAL)
    text = profile.read_text()
    injector = 'faultInjector: {url: "{url:device-manager}/v1/faults"}\n'
    assert injector in text and "promises:\n" in text, "reference-nodelocal.yaml changed; update this selftest"
    profile.write_text(text.replace(injector, "").replace("promises:\n", "promises:\n  reportsFailures: false\n", 1))
    code, out, requirements = _run(tmp_path, profile, "test_readiness_failure.py", "test_readiness_restart.py")
    assert code == 1, f"expected RDY-5 to fail (exit 1), got {code}:\n{out[-3000:]}"
    first = _first(requirements, "RDY-5", "failed", out)
    assert first.startswith("the profile declares promises.reportsFailures: false"), first
    rdy6 = requirements["RDY-6"]
    not_run = rdy6["reason"].split("not run:")[-1]
    assert rdy6["outcome"] == "skipped" and "passed for the steps that ran" in rdy6["reason"], rdy6
    assert "no faultInjector: a readying cannot be held" in not_run and "before-readying" not in not_run, rdy6
