"""IMP-10..12 fail on the reference controller broken in the way each one is about (hidden --broken-* flags).

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries), with only the
fabric-truth module selected: its device-lifecycle scenario walks the moments these rules judge, so a broken variant
fails its requirement in every run, judged from the record (not from a race the scenario might lose).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import profile_variant, run_suite

MODULE = "conformance/suite/implementation/test_fabric_truth.py"
RULES = {
    "IMP-10": "test_a_device_stays_attached_to_the_node_of_every_pod_using_it",
    "IMP-11": "test_binding_conditions_are_true_only_while_the_fabric_says_attached",
    "IMP-12": "test_no_attachment_outlives_its_claim",
}


@pytest.mark.parametrize(
    ("flag", "rule", "says"),
    [
        ("--broken-detach-while-used", "IMP-10", "such answers while the pod was bound"),
        ("--broken-report-while-attaching", "IMP-11", "'attaching')"),
        ("--broken-keep-unready-attach", "IMP-12", "the fabric still holds attachments of the run"),
        ("--broken-detach-all-on-restart", "IMP-10", "such answers while the pod was bound"),
    ],
)
def test_each_broken_variant_fails_its_requirement(tmp_path: Path, flag: str, rule: str, says: str) -> None:
    profile = profile_variant(tmp_path, '"--mode", "keep-in-pool"]', f'"--mode", "keep-in-pool", "{flag}"]')
    code, out, outcomes = run_suite(tmp_path / "junit.xml", "--profile", str(profile), target=MODULE)
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert outcomes.get(RULES[rule]) == "failure", f"{rule} did not fail with {flag}: {outcomes}\n{out[-3000:]}"
    assert says in out, out[-4000:]
    shown = [line.strip() for line in out.splitlines() if says in line]
    print(f"{flag}: {rule} failed with: {shown[0][:600]}")  # what the variant showed (-rP prints it)
