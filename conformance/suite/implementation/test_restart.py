"""IMP-8 a restart of the controller in the middle of an attach loses nothing.

The fault injector slows down the next attach of a leased device, so the attach is still in flight when the
controller process (the profile's controller.process) is killed without warning and started again. The pod must
still bind, with the device attached to its node and its binding conditions True, and once the pod is gone the
device must not stay attached with nobody holding it.

The other scenarios run side by side and share the controller: their bind deadlines include the slack of one
restart (observe.BIND_SLACK_S), and a restarted controller picks up their claims where the old one left off.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation import endpoints
from conformance.observe.slices import (
    BIND_SLACK_S,
    ClaimHistory,
    bound_pod,
    device_conditions,
    pod_claim,
    post_json,
    probe_states,
)
from conformance.suite.scenario import Context, result_fixture, scenario

SLOW_S = 8.0  # extra attach time: long enough to restart inside it, short of the scheduler's binding timeout


@dataclass
class Restart:
    node: str
    identity: str
    at_kill: tuple[str, str] | None  # the probe when the controller was killed
    conditions_at_kill: dict[str, str]
    restart_s: float
    bound_to: str | None = None
    attached_at_bind: tuple[str, str] | None = None
    conditions: dict[str, str] = field(default_factory=dict)  # binding condition -> status once bound
    allocations: list[object] = field(default_factory=list)
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
)
def controller_restart(ctx: Context) -> Restart:
    # The first restartable role (controller.process, or roles[0]: a process the suite started or a restart command
    # for an implementation it did not start); controller=("process",) skips a profile without one.
    role = ctx.profile.restartable()[0]
    node, lease, ns = ctx.remote_fabric()
    [identity] = lease.identities
    probe = ctx.implementation.resolve(ctx.profile.fabric_probe.url)
    faults = ctx.implementation.resolve(ctx.profile.fault_injector.url)
    bind_s = ctx.profile.promises.attach_s + SLOW_S + BIND_SLACK_S
    fault = post_json(faults, {"mode": "slow", "operation": "attach", "device": identity, "delaySeconds": SLOW_S})
    try:
        with ClaimHistory(ctx.cluster, {ns}) as history:
            ctx.objects.create(pinned_pod("app", "gpu", node), ns)
            at_kill = wait_for(
                lambda: probe_states(probe).get(identity),
                lambda s: s is not None,
                timeout=bind_s,
                expected=f"the attach of {identity} to start (the probe to list it)",
                interval=0.1,
                max_interval=0.2,
            )
            claim = pod_claim(ctx.cluster, ns, "app")
            conditions_at_kill = {
                t: s
                for r in claim["status"]["allocation"]["devices"]["results"]
                for t, s in device_conditions(claim, r).items()
            }
            killed = time.monotonic()
            ctx.say(f"IMP-8: restarting role {role.name}: {ctx.implementation.restart_role(role)}")
            seen = Restart(node, identity, at_kill, conditions_at_kill, round(time.monotonic() - killed, 3))
            ctx.measure("controller_restart_seconds", seen.restart_s)
            pod = bound_pod(ctx.cluster, ns, "app", bind_s)
            ctx.measure("restart_to_bound_seconds", round(time.monotonic() - killed, 3))
            seen.bound_to = pod.spec.node_name
            seen.attached_at_bind = probe_states(probe).get(identity)
            claim = pod_claim(ctx.cluster, ns, "app")
            for r in claim["status"]["allocation"]["devices"]["results"]:
                conds = device_conditions(claim, r)
                seen.conditions |= {t: conds.get(t, "missing") for t in r.get("bindingConditions") or []}
            seen.allocations = history.allocations(f"{ns}/{claim['metadata']['name']}")
        ctx.cluster.core.delete_namespaced_pod("app", ns, grace_period_seconds=0)
        try:
            wait_for(
                lambda: probe_states(probe).get(identity),
                lambda s: s is None,
                timeout=ctx.profile.promises.detach_s,
                expected=f"{identity} detached once its pod and claim are gone",
            )
        except WaitTimeout as exc:
            seen.left_attached = str(exc)
        return seen
    finally:
        _delete_fault(f"{faults}/{fault['id']}")


restart = result_fixture("restart", "controller-restart-mid-attach")


@pytest.mark.requirement("IMP-8")
def test_the_attach_in_flight_at_the_restart_completes_and_the_pod_binds(restart: Restart) -> None:
    in_flight = restart.at_kill is not None and restart.at_kill[1] != "attached"
    not_ready = any(s != "True" for s in restart.conditions_at_kill.values()) or not restart.conditions_at_kill
    assert in_flight or not_ready, (
        f"the restart came too late to test anything: probe {restart.at_kill}, conditions {restart.conditions_at_kill}"
    )
    assert restart.bound_to == restart.node, f"pinned to {restart.node}, bound to {restart.bound_to}"
    assert restart.attached_at_bind == (restart.node, "attached"), (
        f"at the binding the probe said {restart.attached_at_bind}"
    )
    assert restart.conditions and set(restart.conditions.values()) == {"True"}, restart.conditions
    # Nothing lost: the pod bound with the allocation it had at the kill, no binding timeout and reallocation.
    allocated = [a for a in restart.allocations if a is not None]
    assert None not in restart.allocations[1:] and len(set(allocated)) == 1, f"allocations: {restart.allocations}"


@pytest.mark.requirement("IMP-8")
def test_nothing_stays_attached_without_a_claim_after_the_restart(restart: Restart) -> None:
    assert not restart.left_attached, restart.left_attached
