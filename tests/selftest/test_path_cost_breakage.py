"""COST-1/COST-2 (SHOULD) fail on a reference controller that takes needless detours, and pass on the correct one.

Runs the real suite in a subprocess against its own local cluster with only the path-cost module selected:
- `--broken-early-reschedule` (reschedule-to-local, identified and counted entries) asks for the reschedule as soon as
  the attach is done, without waiting for the node-local copy. Such a controller costs nothing when the copy happens
  to be there by the scheduler's next PreBind poll, so the node driver here advertises a hot-plugged device only 15 s
  after its attach (`--hotplug-delay`: a slow hot-plug detection): the scheduler then allocates another fabric device
  (COST-1: a round that lands on the fabric again) and the stack attaches it (COST-2: two attaches);
- `--broken-needless-reattach` (keep-in-pool) detaches the attached device and attaches it again before reporting
  (COST-2: two attaches, a detach on the way);
- the correct controller with the same slow node driver waits for the copy: no detour (COST-1, COST-2 pass), so the
  failures above are the controller's choices, not the slow copy's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import profile_changes as _variant
from selftest.suite_runner import run_suite

MODULE = "conformance/suite/implementation/test_path_cost.py"
TESTS = {
    "COST-1": "test_scheduling_rounds_are_the_binding_models_minimum",
    "COST-2": "test_one_attach_per_device_and_no_detach_on_the_way",
    "COST-3": "test_allocation_to_binding_within_the_promised_attach_and_one_poll",
}
SLOW_COPY = ('"--republish"]', '"--republish", "--hotplug-delay", "15"]')
RESCHEDULE = '"--mode", "reschedule-to-local"'


@pytest.mark.parametrize(
    ("source", "changes", "broken", "says"),
    [
        (
            "reference-reschedule.yaml",
            [(RESCHEDULE, f'{RESCHEDULE}, "--broken-early-reschedule"'), SLOW_COPY],
            ("COST-1", "COST-2"),
            "no node-local copy could be allocated when the reschedule was asked for",
        ),
        (
            "reference-counted.yaml",
            [(RESCHEDULE, f'{RESCHEDULE}, "--broken-early-reschedule"'), SLOW_COPY],
            ("COST-1", "COST-2"),
            "no node-local copy could be allocated when the reschedule was asked for",
        ),
        (
            "reference.yaml",
            [('"--mode", "keep-in-pool"]', '"--mode", "keep-in-pool", "--broken-needless-reattach"]')],
            ("COST-2",),
            "2 attaches to",
        ),
    ],
    ids=["early-reschedule", "early-reschedule-counted", "needless-reattach"],
)
def test_each_detour_fails_the_should_it_breaks(
    tmp_path: Path, source: str, changes: list[tuple[str, str]], broken: tuple[str, ...], says: str
) -> None:
    profile = _variant(tmp_path, source, *changes)
    code, out, outcomes = run_suite(tmp_path / "junit.xml", "--profile", str(profile), target=MODULE)
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    for rule in broken:
        assert outcomes.get(TESTS[rule]) == "failure", f"{rule} did not fail: {outcomes}\n{out[-3000:]}"
    assert says in out, out[-4000:]
    assert "the path of the pod on" in out, out[-4000:]  # the timeline of the detour is in the failure
    shown = [line.strip() for line in out.splitlines() if says in line and line.startswith("E ")] or [says]
    print(f"{source} {changes[0][1]}: {broken} failed with: {shown[0][:600]}")  # -rP prints it


def test_a_late_copy_costs_a_correct_controller_no_detour(tmp_path: Path) -> None:
    profile = _variant(tmp_path, "reference-reschedule.yaml", SLOW_COPY)
    code, out, outcomes = run_suite(tmp_path / "junit.xml", "--profile", str(profile), target=MODULE)
    for rule in ("COST-1", "COST-2"):
        assert outcomes.get(TESTS[rule]) == "passed", f"{rule} did not pass: {outcomes} (exit {code})\n{out[-4000:]}"
