"""NODE-4 (a force-deleted pod's device held until the node unprepared the claim) against a reference controller broken
on purpose, on kind: `--broken-detach-on-release` detaches a released device at once and moves one another claim
holds without asking whether its node still uses it, which is what a controller that reads only the API does after a
force delete (kubernetes/kubernetes#141471). The force-delete scenario runs alone on its own kind cluster with the
reference stack of reference-kind.yaml, the controller's Deployment running with that flag; NODE-4 must fail with the
cause on its first line. The correct stack passes it in every kind run (`make conformance-kind`).
Needs the kind node image and the reference image (`make kind-image`); skipped with that command without them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from conformance.cluster.versions import KubeVersion
from selftest.suite_runner import ROOT, profile_variant, run_suite
from selftest.test_kind_provider_with_kind import _images_or_skip

CONTROLLER = ROOT / "fake-drivers" / "deploy" / "base" / "controller.yaml"
TEST = "test_a_force_deleted_pods_device_is_held_until_the_node_unprepared_it"


def _broken_controller(tmp_path: Path) -> Path:
    text = CONTROLLER.read_text()
    broken = text.replace("--mode, keep-in-pool,", "--mode, keep-in-pool, --broken-detach-on-release,")
    assert broken != text, "controller.yaml's command changed: update this selftest"
    manifest = tmp_path / "controller.yaml"
    manifest.write_text(broken)
    return profile_variant(
        tmp_path,
        f'"{ROOT / "fixtures" / "profiles"}/../../fake-drivers/deploy/base/controller.yaml"',
        f'"{manifest}"',
        source="reference-kind.yaml",
    )


def _errors(junit: Path) -> list[str]:
    """The errors (setup, teardown) the suite's JUnit names, with their messages: what made a test an error."""
    found = [(case.get("name"), e) for case in ET.parse(junit).iter("testcase") for e in case.findall("error")]
    return [f"{name}: {(e.get('message') or '')[:2000]}" for name, e in found]


def test_a_controller_that_detaches_on_release_fails_node4_naming_the_detach(
    k8s_version: KubeVersion, tmp_path: Path
) -> None:
    _images_or_skip(k8s_version)
    reports = tmp_path / "reports"
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml",
        "--provider",
        "kind",
        "--profile",
        str(_broken_controller(tmp_path)),
        f"--reports-dir={reports}",
        target="conformance/suite/implementation/test_force_delete.py",
    )
    assert code == 1, f"expected NODE-4 to fail (exit 1), got exit {code}:\n{out[-4000:]}"
    assert outcomes.get(TEST) == "failure", f"{outcomes}: {_errors(tmp_path / 'junit.xml')}\n{out[-4000:]}"
    entry = yaml.safe_load((reports / "conformance-report.yaml").read_text())["requirements"]["NODE-4"]
    first = entry["reason"].splitlines()[0].removeprefix("Failed: ")
    assert first.startswith("the implementation ") and "force-deleted" in first, first
    assert "detached before NodeUnprepareResources" in first, f"the first line does not name the cause: {first}"
