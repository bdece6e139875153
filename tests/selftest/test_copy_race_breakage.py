"""IMP-27 catches a hot-plugged copy offered while another copy of the device is held, in each binding model.

Each test runs the copy-race scenario (conformance/suite/implementation/test_copy_race.py) in a subprocess on its own
cluster against a reference stack broken one way, and expects IMP-27 to fail with the two holders' revision intervals
or the offer's revision, and the physical device.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import profile_variant, run_suite

TARGET = "conformance/suite/implementation/test_copy_race.py"
HOLD = "--broken-no-hold"

VARIANTS = {
    # reschedule-to-local: no hold on the node-local copy, and the reschedule asked only 2 s after it appears (a stack
    # that finds copies on a periodic rescan): meanwhile the pending fabric allocation holds the device and a waiting
    # pod gets the copy.
    "reschedule-no-hold": (
        "reference-reschedule.yaml",
        '"--mode", "reschedule-to-local"]',
        f'"--mode", "reschedule-to-local", "{HOLD}"]',
    ),
    # count-based pools: the same mechanism (the hold rule names the physical device the count entry was assigned).
    "counted-no-hold": (
        "reference-counted.yaml",
        '"--fabric-entries", "counted"]',
        f'"--fabric-entries", "counted", "{HOLD}"]',
    ),
    # keep-in-pool: the node driver republishes the hot-plugged device with no deny list, while the claim keeps the
    # fabric entry: the copy is offered for as long as the pod runs.
    "keep-in-pool-no-deny-list": ("reference.yaml", '"--republish", "--deny-list"]', '"--republish"]'),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_copy_race_catches_a_copy_offered_while_the_device_is_held(tmp_path: Path, variant: str) -> None:
    source, old, new = VARIANTS[variant]
    profile = profile_variant(tmp_path, old, new, source=source)
    code, out, outcomes = run_suite(tmp_path / "junit.xml", "--profile", str(profile), target=TARGET)
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    failed = {name for name, kind in outcomes.items() if kind == "failure"}
    assert failed == set(outcomes), f"every IMP-27 test must fail: {outcomes}\n{out[-3000:]}"
    assert "a copy of a held device went to another claim or was offered" in out, out[-3000:]
    assert "held twice for" in out or "offered free from revision" in out, out[-3000:]
    assert "physical device " in out and " from revision " in out, out[-3000:]
