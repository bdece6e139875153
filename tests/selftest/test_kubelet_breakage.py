"""The kubelet path's checks (NODE-1..3) against a Go kubelet plugin broken on purpose, on kind.

Each case runs the kubelet-path scenario on its own kind cluster with the reference stack of reference-kind.yaml,
whose kubelet plugin DaemonSet runs with one of its --broken-* flags (fake-drivers/kubelet-plugin/main.go): the
requirement it breaks must fail, with the evidence in the message, and the others it leaves alone must not fail.
Needs the kind node image and the reference image (`make kind-image`); skipped with that command without them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cluster.versions import KubeVersion
from selftest.suite_runner import ROOT, profile_variant, run_suite
from selftest.test_kind_provider_with_kind import _images_or_skip

PLUGIN = ROOT / "fake-drivers" / "deploy" / "base" / "kubelet-plugin.yaml"
TESTS = {
    "NODE-1": "test_the_container_starts_with_its_cdi_device",
    "NODE-2": "test_the_device_is_prepared_on_the_allocated_node_after_binding",
    "NODE-3": "test_the_device_is_unprepared_before_it_is_detached",
}


def _broken_plugin(tmp_path: Path, flag: str, list_claims: bool) -> Path:
    """reference-kind.yaml with its kubelet plugin manifest replaced by a copy that runs the plugin with `flag`."""
    text = PLUGIN.read_text()
    broken = text.replace("--deny-list]", f"--deny-list, {flag}]")
    assert broken != text, "kubelet-plugin.yaml's command changed: update this selftest"
    if list_claims:  # prepare-early watches claims: more than the correct plugin may read
        claims = "    resources: [resourceclaims]\n    verbs: [get]"
        assert claims in broken, "kubelet-plugin.yaml's claim rule changed: update this selftest"
        broken = broken.replace(claims, "    resources: [resourceclaims]\n    verbs: [get, list]")
    manifest = tmp_path / "kubelet-plugin.yaml"
    manifest.write_text(broken)
    return profile_variant(
        tmp_path,
        f'"{ROOT / "fixtures" / "profiles"}/../../fake-drivers/deploy/base/kubelet-plugin.yaml"',
        f'"{manifest}"',
        source="reference-kind.yaml",
    )


@pytest.mark.parametrize(
    ("flag", "broken", "evidence", "list_claims"),
    [
        ("--broken-no-cdi", "NODE-1", "started without any CDI device", False),
        ("--broken-prepare-early", "NODE-2", "written before the pod was bound", True),
        ("--broken-unprepare-after-detach", "NODE-3", "while its CDI spec was still there", False),
        ("--broken-never-unprepare", "NODE-3", "NodeUnprepareResources not called", False),
    ],
)
def test_a_broken_kubelet_plugin_fails_the_requirement_it_breaks(
    k8s_version: KubeVersion, tmp_path: Path, flag: str, broken: str, evidence: str, list_claims: bool
) -> None:
    _images_or_skip(k8s_version)
    profile = _broken_plugin(tmp_path, flag, list_claims)
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml",
        "--provider",
        "kind",
        "--profile",
        str(profile),
        f"--reports-dir={tmp_path / 'reports'}",
        target="conformance/suite/implementation/test_kubelet_path.py",
    )
    assert code == 1, f"{flag}: expected {broken} to fail (exit 1), got exit {code}:\n{out[-4000:]}"
    assert outcomes.get(TESTS[broken]) == "failure", f"{flag}: {outcomes}\n{out[-4000:]}"
    assert evidence in out, f"{flag}: the failure does not show {evidence!r}:\n{out[-4000:]}"
    failed = {req for req, test in TESTS.items() if outcomes.get(test) == "failure"}
    assert failed == {broken}, f"{flag} broke only {broken}, yet {failed} failed: {outcomes}"
