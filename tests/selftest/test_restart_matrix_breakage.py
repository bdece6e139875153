"""IMP-8's restart matrix catches stacks that lose work across a restart in the cells the four staged steps of old did
not reach (hidden --broken-* flags of fake-drivers/src/fake_drivers/controller/cli.py):

- --broken-forget-unsent-on-restart: work decided but not yet sent to the fabric when the controller restarts is lost
  (an allocated claim whose device is still free is never attached; an idle device due a detach stays attached):
  cells allocated-free, released-attached (the detach path's step 'decided') and failed-seen (the failure path's
  'failure seen': the attach that failed while the controller was down is neither tried again nor reported) fail;
- --broken-forget-move-on-restart: a device found at start attached to (or detaching from) another node than its
  claim's allocation is never moved: cells move-attached-a and move-detaching-a fail.

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries), test_restart.py only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import profile_variant, run_suite

BINDS = "test_the_pod_binds_by_an_allowed_path_after_the_restart"
LET_GO = "test_nothing_stays_attached_after_the_restart"


@pytest.mark.parametrize(
    ("flag", "failing", "says"),
    [
        (
            "--broken-forget-unsent-on-restart",
            [f"{BINDS}[allocated-free]", f"{LET_GO}[released-attached]", f"{BINDS}[failed-seen]"],
            "cell released-attached (detach path, restarted after step 'decided': claim released x fabric attached",
        ),
        (
            "--broken-forget-move-on-restart",
            [f"{BINDS}[move-attached-a]", f"{BINDS}[move-detaching-a]"],
            "cell move-attached-a (move path, restarted after step 'detach from A decided': claim allocated or pending "
            "(the model's) x fabric attached to A",
        ),
    ],
)
def test_a_stack_that_loses_work_across_a_restart_fails_its_cells(
    tmp_path: Path, flag: str, failing: list[str], says: str
) -> None:
    profile = profile_variant(tmp_path, '"--mode", "keep-in-pool"]', f'"--mode", "keep-in-pool", "{flag}"]')
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml", "--profile", str(profile), target="conformance/suite/implementation/test_restart.py"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    for test in failing:
        assert outcomes.get(test) == "failure", f"{test} did not fail with {flag}: {outcomes}\n{out[-3000:]}"
    assert says in out, out[-4000:]
    # The cells the flag does not touch still pass: the failure is the lost work's, not the matrix's.
    assert outcomes.get(f"{BINDS}[allocated-attaching]") == "passed", outcomes
