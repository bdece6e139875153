"""IMP-8's restart between every two steps of the detach and failure paths (restart_paths.py) catches stacks that lose
the step they were restarted after, with the cell, its path and its step on the failure's first line (hidden
--broken-* options of fake-drivers/src/fake_drivers/controller/cli.py):

- --broken-forget-detach-on-restart: a detach found begun at start (the device guarded: attached, detaching or free)
  is never sent, or its guard never lifted: cells released-guarded (guard made), released-detaching (detach sent) and
  released-detached (detach done) fail "nothing stays attached";
- --broken-reoffer-failed-on-restart: the quarantine rules found at start are deleted as stale, the failure they
  record forgotten: cells failed-hidden (device out of offer: the failed device attached again) and failed-reported
  (failure reported: the failed device offered again) fail "the pod binds";
- --broken-attachment-records FILE: a stale record of every attach done makes the restarted controller attach again a
  device detached and offered before the restart: cell released-offered (offered again) fails.

The detach path's first step (decided: released-attached) and the failure path's first (failure seen: failed-seen) fail
with --broken-forget-unsent-on-restart (test_restart_matrix_breakage.py). Runs the real suite in a subprocess against
its own local cluster (needs the cached binaries), test_restart.py only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import failure_first_line, profile_variant, run_suite

BINDS = "test_the_pod_binds_by_an_allowed_path_after_the_restart"
LET_GO = "test_nothing_stays_attached_after_the_restart"
KEEP = '"--mode", "keep-in-pool"]'


@pytest.mark.parametrize(
    ("flag", "failing", "says"),
    [
        (
            "--broken-forget-detach-on-restart",
            {
                f"{LET_GO}[released-guarded]": "detach path, restarted after step 'guard made'",
                f"{LET_GO}[released-detaching]": "detach path, restarted after step 'detach sent'",
                f"{LET_GO}[released-detached]": "detach path, restarted after step 'detach done'",
            },
            "never seen detached",
        ),
        (
            "--broken-reoffer-failed-on-restart",
            {
                f"{BINDS}[failed-hidden]": "failure path, restarted after step 'device out of offer'",
                f"{BINDS}[failed-reported]": "failure path, restarted after step 'failure reported'",
            },
            "the failed device came back after the restart",
        ),
        (
            '--broken-attachment-records", "{workdir}/attachment-records.json',
            {f"{LET_GO}[released-offered]": "detach path, restarted after step 'offered again'"},
            "again after the restart",
        ),
    ],
    ids=["forget-detach", "reoffer-failed", "attachment-records"],
)
def test_a_stack_that_loses_a_step_across_a_restart_fails_that_steps_cell(
    tmp_path: Path, flag: str, failing: dict[str, str], says: str
) -> None:
    profile = profile_variant(tmp_path, KEEP, f'"--mode", "keep-in-pool", "{flag}"]')
    junit = tmp_path / "junit.xml"
    code, out, outcomes = run_suite(
        junit, "--profile", str(profile), target="conformance/suite/implementation/test_restart.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    for test, step in failing.items():
        assert outcomes.get(test) == "failure", f"{test} did not fail with {flag}: {outcomes}\n{out[-3000:]}"
        line = failure_first_line(junit, test)
        cell = test.rsplit("[", 1)[1].rstrip("]")
        assert f"cell {cell} ({step}" in line, f"the first line does not name the cell and its step: {line!r}"
        print(f"{flag}: {test} failed with: {line[:400]}")  # -rP prints it
    assert says in out, out[-4000:]
    # The cells of the other paths still pass: the failure is the lost step's, not the matrix's.
    assert outcomes.get(f"{BINDS}[allocated-attaching]") == "passed", outcomes
