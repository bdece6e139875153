"""The node-local readiness-gate scenarios (RDY-*) fail on the reference node-local stack (reference-nodelocal.yaml)
broken in the way each one is about (hidden --broken-* flags of fake-drivers/src/fake_drivers/readier/cli.py):
conditions True before the device is ready (RDY-3), no failure condition on a readying failure (RDY-5), a node's
daemon writing conditions for another node's claims with the rights to do so (RDY-8).

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries), with only the
scenario's module selected.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from selftest.suite_runner import ROOT, profile_variant, run_suite

IMPL = "conformance/suite/implementation"
SOURCE = "reference-nodelocal.yaml"
COMMAND_END = '"--interval", "0.3"]'
RBAC = ROOT / "fake-drivers" / "deploy" / "readier-rbac.yaml"
NODE_VERBS = 'verbs: ["associated-node:update", "associated-node:patch"]'


def _central_rights(tmp_path: Path, profile: Path) -> None:
    """The variant's daemons get a central controller's rights (arbitrary-node), as a chart that grants them would."""
    text = RBAC.read_text()
    assert NODE_VERBS in text, f"{RBAC} no longer grants {NODE_VERBS}; update this selftest"
    broken = tmp_path / "readier-rbac-arbitrary.yaml"
    central = (
        'verbs: ["associated-node:update", "associated-node:patch", "arbitrary-node:update", "arbitrary-node:patch"]'
    )
    broken.write_text(text.replace(NODE_VERBS, central))
    original = str(ROOT / "fixtures" / "profiles" / "../../fake-drivers/deploy/readier-rbac.yaml")
    content = profile.read_text()
    assert original in content, f"{profile} no longer applies {original}"
    profile.write_text(content.replace(original, str(broken)))


@pytest.mark.parametrize(
    ("flag", "module", "test", "says"),
    [
        (
            "--broken-ready-before-prepared",
            "test_readiness.py",
            "test_conditions_true_only_once_the_device_is_ready",
            "but the probe said device",
        ),
        (
            "--broken-no-failure-condition",
            "test_readiness_failure.py",
            "test_failure_condition_with_reason_then_reallocation_not_onto_the_failed_device",
            "a failure condition True on the device whose readying failed",
        ),
        (
            "--broken-write-other-nodes",
            "test_readiness_privilege.py",
            "test_a_nodes_writer_writes_only_its_nodes_claims_and_slices",
            "was admitted",
        ),
    ],
)
def test_each_broken_readiness_variant_fails_its_requirement(
    tmp_path: Path, flag: str, module: str, test: str, says: str
) -> None:
    profile = profile_variant(tmp_path, COMMAND_END, f'"--interval", "0.3", "{flag}"]', source=SOURCE)
    if flag == "--broken-write-other-nodes":
        _central_rights(tmp_path, profile)
    code, out, outcomes = run_suite(tmp_path / "junit.xml", "--profile", str(profile), target=f"{IMPL}/{module}")
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert outcomes.get(test) == "failure", f"{test} did not fail with {flag}: {outcomes}\n{out[-3000:]}"
    assert says in out, out[-4000:]


def test_a_scenario_failing_midway_fails_only_its_own_requirements(tmp_path: Path) -> None:
    """--broken-never-ready: readiness-gate's devices are readied, but no condition is written, so its pod never
    binds. The wait for the binding is RDY-2's and fails it; RDY-1's evidence (the slices, the first allocation)
    exists before it and is judged; RDY-3 and RDY-4 are not judged, saying where the scenario stopped and why
    (conformance/suite/judged.py) — none of them fails with another requirement's error."""
    profile = profile_variant(tmp_path, COMMAND_END, '"--interval", "0.3", "--broken-never-ready"]', source=SOURCE)
    junit = tmp_path / "junit.xml"
    code, out, outcomes = run_suite(junit, "--profile", str(profile), target=f"{IMPL}/test_readiness.py")
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    rdy = {
        "RDY-1": "test_node_local_devices_carry_the_conditions_and_the_allocation_copies_them",
        "RDY-2": "test_conditions_are_written_per_allocated_device_of_its_own_driver",
        "RDY-3": "test_conditions_true_only_once_the_device_is_ready",
        "RDY-4": "test_the_pod_binds_only_once_every_device_is_ready_on_its_node",
    }
    assert outcomes.get(rdy["RDY-1"]) == "passed", f"RDY-1 was not judged on its evidence: {outcomes}\n{out[-4000:]}"
    assert outcomes.get(rdy["RDY-2"]) == "failure", outcomes
    shown = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    for rid in ("RDY-3", "RDY-4"):
        assert outcomes.get(rdy[rid]) == "skipped" and shown[rdy[rid]].get("outcome") == "not-judged", shown
    # the cause is the record's (suite/cause.py): the claim was allocated and its binding conditions never written
    cause = "RDY-3, RDY-4 MUST not-judged: readiness-gate failed before the pod bound (cause: AssertionError: claim "
    assert cause + "readiness-gate-" in out, out[-4000:]
    assert re.search(r"RDY-2 +MUST +failed +AssertionError: claim readiness-gate-\S+ allocated .*never written", out), (
        out[-4000:]
    )
    assert "2 not judged" in out, out[-2000:]
