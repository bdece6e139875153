"""IMP-8's restart matrix on a multi-role stack (fixtures/profiles/reference-roles.yaml: a pool publisher, an attacher
and a condition writer, each restarted in turn): one role broken, the cells of ITS restart that follow the step it owns
fail, naming that role on the first line, while the other roles' restarts of the same cells pass (each role is caught
on its own, not the stack as a whole). The hidden --broken-* options of fake-drivers/src/fake_drivers/controller/cli.py,
given to one role's process only:

- the attacher with --broken-forget-detach-on-restart: the detach it finds guarded at its start is never sent; cell
  released-guarded (detach path, restarted after step 'guard made': the detach is the attacher's next step) fails
  "never seen detached". The steps after the detach (lift the guard, offer the device again) are the publisher's: the
  attacher's restarts of released-detaching and released-detached lose nothing and pass;
- the attacher with --broken-forget-unsent-on-restart: work decided but not sent when it restarted is lost; cells
  released-attached (detach path, 'decided') and failed-seen (failure path, 'failure seen': the attach that failed
  while the attacher was down is neither tried again nor recorded, so nobody reports it) fail;
- the condition writer with --broken-reoffer-failed-on-restart: the failure a quarantine rule found at its start
  records is never reported (the condition writer's share of the mode: the publisher's would delete the rule); cell
  failed-hidden (failure path, restarted after step 'device out of offer', the report held by the suite's guard until
  it is back) fails "was never reported". Run with a bindingTimeout of 60 s: the report is owed within attachSeconds
  of the guard's lift while the allocation stands, and with the profile's 20 s the binding timeout would clear the
  allocation about then, leaving nothing owed. Its restart after the report (failed-reported) loses nothing and passes.

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries), test_restart.py only
(about 4 minutes of restarts: three roles).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import failure_first_line, failure_message, profile_changes, run_suite

BINDS = "test_the_pod_binds_by_an_allowed_path_after_the_restart"
LET_GO = "test_nothing_stays_attached_after_the_restart"
ROLES = {"attacher": '"--role", "attacher",', "condition-writer": '"--role", "conditions",'}
NAMES = ("pool-publisher", "attacher", "condition-writer")


@pytest.mark.parametrize(
    ("role", "flag", "failing", "says", "extra", "passing"),
    [
        (
            "attacher",
            "--broken-forget-detach-on-restart",
            {f"{LET_GO}[released-guarded]": "detach path, restarted after step 'guard made'"},
            "never seen detached",
            (),
            (f"{LET_GO}[released-detaching]", f"{LET_GO}[released-detached]"),  # the publisher's steps follow
        ),
        (
            "attacher",
            "--broken-forget-unsent-on-restart",
            {
                f"{LET_GO}[released-attached]": "detach path, restarted after step 'decided'",
                f"{BINDS}[failed-seen]": "failure path, restarted after step 'failure seen'",
            },
            "was lost across the restart",
            (),
            (),
        ),
        (
            "condition-writer",
            "--broken-reoffer-failed-on-restart",
            {f"{BINDS}[failed-hidden]": "failure path, restarted after step 'device out of offer'"},
            "was never reported",
            ("--binding-timeout", "60"),
            (f"{BINDS}[failed-reported]",),  # reported before its restart: nothing of it left to lose
        ),
    ],
    ids=["attacher-forget-detach", "attacher-forget-unsent", "condition-writer-reoffer-failed"],
)
def test_a_broken_role_of_a_multi_role_stack_fails_the_cells_of_its_own_restart(
    tmp_path: Path,
    role: str,
    flag: str,
    failing: dict[str, str],
    says: str,
    extra: tuple[str, ...],
    passing: tuple[str, ...],
) -> None:
    anchor = ROLES[role]
    profile = profile_changes(tmp_path, "reference-roles.yaml", (anchor, f'{anchor} "{flag}",'))
    junit = tmp_path / "junit.xml"
    target = "conformance/suite/implementation/test_restart.py"
    code, out, outcomes = run_suite(junit, "--profile", str(profile), *extra, target=target, timeout=1200)
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    for test, step in failing.items():
        assert outcomes.get(test) == "failure", f"{test} did not fail with {role} {flag}: {outcomes}\n{out[-3000:]}"
        cell = test.rsplit("[", 1)[1].rstrip("]")
        line = failure_first_line(junit, test)
        assert line.startswith(f"role {role}, cell {cell} ({step}"), f"the first line does not name the role: {line!r}"
        print(f"{role} {flag}: {test} failed with: {line[:400]}")  # -rP prints it
    assert says in out, out[-4000:]
    # Caught on its own: every failing cell fails for the broken role's restart only, and the others pass.
    for test, outcome in outcomes.items():
        if outcome == "failure" and test.startswith((BINDS, LET_GO)):
            message = failure_message(junit, test)
            others = [name for name in NAMES if name != role and f"role {name}, cell" in message]
            assert not others, f"{test} failed for the restart of {others} too, with only {role} broken:\n{message}"
    for test in (f"{BINDS}[allocated-attaching]", *passing):  # cells whose next step is not the broken role's
        assert outcomes.get(test) == "passed", f"{test}: {outcomes}"
