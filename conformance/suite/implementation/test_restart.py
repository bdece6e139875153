"""IMP-8 a restart of the controller in the middle of an attach loses nothing.

The fault injector slows down the next attach of a leased device, so the attach is still in flight when the
controller process (the profile's controller.process) is killed without warning and started again. The pod must
still bind on its node with a device the fabric says is attached there (outcome.py: through the fabric allocation,
or a reschedule onto the node-local copy), with no allocation lost on the way (none cleared by a failure condition
or by the binding timeout), and once the pod is gone the device must not stay attached with nobody holding it.

The other scenarios run side by side and share the controller: their bind deadlines include the slack of one
restart (observe.BIND_SLACK_S), and a restarted controller picks up their claims where the old one left off.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation import endpoints
from conformance.observe.slices import allocation_results, device_conditions, post_json
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.scenario import Context, result_fixture, scenario

# Extra attach time: the kill comes as soon as the probe lists the attach, so it is in flight then; short enough that
# a restart, the attach and (reschedule-to-local) the node-local republish fit in the suite's bindingTimeout.
SLOW_S = 4.0


@dataclass
class Restart:
    node: str
    identity: str
    at_kill: tuple[str, str] | None  # the probe when the controller was killed
    conditions_at_kill: dict[str, str]
    restart_s: float
    # The scheduler's bindingTimeout, and whether the restart alone (its measured length, the slowed attach, the
    # promised attach and one PreBind poll) reaches it: then a binding timeout on the way is the cluster's doing, not
    # a loss, and IMP-8 asks only that the pod still ends bound and nothing stays attached.
    binding_timeout_s: float = 0.0
    timeout_expected: bool = False
    outcome: Outcome | None = None
    left_attached: str = ""  # after the pod was deleted: what the probe still showed past detachSeconds


def _delete_fault(url: str) -> None:
    """Disarm the fault if the attach did not use it (404: it was used up)."""
    try:
        endpoints.urlopen(urllib.request.Request(url, method="DELETE"), timeout=10).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise


@scenario(
    "controller-restart-mid-attach",
    "the controller is killed and restarted while a slowed-down attach is in flight; the pod still binds",
    ("IMP-8",),
    probe=True,
    faults=True,
    controller=("process",),
    exclusive=True,  # it restarts the shared controller: other scenarios must not see that
)
def controller_restart(ctx: Context) -> Restart:
    # The first restartable role (controller.process, or roles[0]: a process the suite started or a restart command
    # for an implementation it did not start); controller=("process",) skips a profile without one.
    role = ctx.profile.restartable()[0]
    # Count-based entries: the physical device is not known before the attach, so the fault selects the attaches to
    # the scenario's node, which it has to itself meanwhile; the device is the one the probe then shows attaching.
    node, lease, ns = ctx.remote_fabric(exclusive=ctx.counted)
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    faults = ctx.implementation.resolve(ctx.profile.fault_injector.url)
    bind_s = bind_timeout(ctx.profile, SLOW_S)
    target = {"node": node} if ctx.counted else {"device": lease.identities[0]}
    fault = post_json(faults, {"mode": "slow", "operation": "attach", "delaySeconds": SLOW_S} | target)

    def attaching() -> tuple[str, tuple[str, str]] | None:
        states = probe.now()
        if not ctx.counted:
            state = states.get(lease.identities[0])
            return (lease.identities[0], state) if state else None
        return next(((i, s) for i, s in sorted(states.items()) if s == (node, "attaching")), None)

    try:
        with ctx.history(ns) as history:
            ctx.objects.create(pinned_pod("app", "gpu", node), ns)
            identity, at_kill = wait_for(
                attaching,
                lambda s: s is not None,
                timeout=bind_s,
                expected=f"the attach of the pod's device to {node} to start (the probe to list it)",
                interval=0.1,
                max_interval=0.2,
            )
            claim = history.wait(_allocated_claim, timeout=SCHEDULE_S, expected="the pod's claim allocated")
            conditions_at_kill = {
                t: s
                for r in claim["status"]["allocation"]["devices"]["results"]
                for t, s in device_conditions(claim, r).items()
            }
            killed = time.monotonic()
            ctx.say(f"IMP-8: restarting role {role.name}: {ctx.implementation.restart_role(role)}")
            seen = Restart(node, identity, at_kill, conditions_at_kill, round(time.monotonic() - killed, 3))
            ctx.measure("controller_restart_seconds", seen.restart_s)
            seen.binding_timeout_s = float(ctx.cluster.info.binding_timeout_s)
            needed = seen.restart_s + SLOW_S + ctx.profile.promises.attach_s + PREBIND_POLL_S
            seen.timeout_expected = needed >= seen.binding_timeout_s
            # after a binding timeout the pod goes round again: give it one more timeout to bind
            seen.outcome = follow(ctx, history, node, bind_s + seen.restart_s + seen.binding_timeout_s)
            ctx.measure("restart_to_bound_seconds", round(time.monotonic() - killed, 3))
        used = {i for i in seen.outcome.final_identities() if i} | {identity}  # also the device of the kill
        ctx.cluster.core.delete_namespaced_pod("app", ns, grace_period_seconds=0)
        try:
            wait_for(
                lambda: {i: s for i, s in probe.now().items() if i in used},
                lambda left: not left,
                timeout=ctx.profile.promises.detach_s,
                expected=f"{sorted(used)} detached once its pod and claim are gone",
            )
        except WaitTimeout as exc:
            seen.left_attached = str(exc)
        return seen
    finally:
        _delete_fault(f"{faults}/{fault['id']}")


def _allocated_claim(history: History) -> dict[str, Any] | None:
    return next((c for c in history.latest("claim").values() if allocation_results(c)), None)


restart = result_fixture("restart", "controller-restart-mid-attach")


@pytest.mark.requirement("IMP-8")
def test_the_attach_in_flight_at_the_restart_completes_and_the_pod_binds(restart: Restart) -> None:
    in_flight = restart.at_kill is not None and restart.at_kill[1] != "attached"
    not_ready = any(s != "True" for s in restart.conditions_at_kill.values()) or not restart.conditions_at_kill
    assert in_flight or not_ready, (
        f"the restart came too late to test anything: probe {restart.at_kill}, conditions {restart.conditions_at_kill}"
    )
    assert restart.outcome is not None
    # Nothing lost: bound where the fabric says the device is, by the happy path of either model (no allocation
    # cleared by a failure or the binding timeout, none edited in place).
    problems = restart.outcome.binding_problems(timeouts=restart.timeout_expected)
    timing = f"\n  the restart took {restart.restart_s:.1f}s; bindingTimeout {restart.binding_timeout_s:g}s" + (
        " (a timeout on the way was accepted: the restart alone reaches it)" if restart.timeout_expected else ""
    )
    assert not problems, "\n".join(problems) + f"\n  {restart.outcome.describe()}" + timing


@pytest.mark.requirement("IMP-8")
def test_nothing_stays_attached_without_a_claim_after_the_restart(restart: Restart) -> None:
    assert not restart.left_attached, restart.left_attached
