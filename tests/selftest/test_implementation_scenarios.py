"""The IMP-5..IMP-8 scenarios pass on the reference stack where it does what they check, and fail where it is
broken on purpose. Each test runs the real suite in a subprocess against its own local cluster.

The --broken-never-detach and --broken-forget-on-restart controller flags come with the reference controller's
broken modes (a separate change); until it is merged those two tests fail at the controller's start-up.
"""

from __future__ import annotations

from pathlib import Path

from selftest.suite_runner import ROOT, profile_variant, run_suite

CONTROLLER = '"--mode", "keep-in-pool"]'


def test_reschedule_to_local_passes_on_the_reschedule_profile(tmp_path: Path) -> None:
    profile = ROOT / "fixtures" / "profiles" / "reference-reschedule.yaml"
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_rewrite.py"
    )
    assert code == 0, f"expected IMP-7 to pass on reference-reschedule.yaml, got exit {code}:\n{out[-3000:]}"
    assert outcomes and set(outcomes.values()) == {"passed"}, outcomes


def test_duplicates_are_caught_when_the_node_driver_republishes_without_the_deny_list(tmp_path: Path) -> None:
    """keep-in-pool without --deny-list: an attached device is offered by the node's slice while a claim holds
    its fabric copy, and other pods of the burst get it, so the invariant watcher fails the IMP-6 scenario."""
    profile = profile_variant(tmp_path, '"--republish", "--deny-list"]', '"--republish"]')
    code, out, _ = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_duplicates.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert "invariants broken while it ran" in out, out[-3000:]
    # Seen on 1.37.2: the republished copies are allocated too, so two claims hold one device (held-twice).
    assert "held-twice" in out or "offered-while-held" in out, out[-3000:]


def test_detach_is_caught_when_the_controller_never_detaches(tmp_path: Path) -> None:
    profile = profile_variant(tmp_path, CONTROLLER, '"--mode", "keep-in-pool", "--broken-never-detach"]')
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_detach.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert outcomes["test_device_is_detached_within_the_promised_time[one]"] == "failure", outcomes
    assert "still attached" in out, out[-3000:]


def test_restart_is_caught_when_the_restarted_controller_forgets_the_attach(tmp_path: Path) -> None:
    profile = profile_variant(tmp_path, CONTROLLER, '"--mode", "keep-in-pool", "--broken-forget-on-restart"]')
    code, out, _ = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_restart.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert "FAILED conformance/suite/implementation/test_restart.py::" in out, out[-3000:]
