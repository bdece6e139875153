"""IMP-8 as a matrix: every restartable role of the stack (Profile.restartable(): a process the suite kills with
SIGKILL and starts again, or a declared restart command) restarted at every step of a device's life:

- before-attach: the role is killed, the pod created while it is down, and the role started again: its restart
  began before any attach of the pod's device could (a role that attaches attaches only once it is back; a restart
  command kills and starts in one, so there the pod is created right before it);
- attach-in-flight: while a slowed attach (SLOW_S longer) is in flight;
- attached-unreported: while an attach is in flight, so that it completes while the role is down: the stack comes
  back to a device attached with no condition written yet. A process role: the attach hangs, and is let complete
  between the kill and the start (the fabric says attached before the role starts again), so the step is walked
  in every run; a role with a restart command: a short attach that completes while the command runs, by timing
  (the step is checked from the record, and fails "not walked" when the timing missed it);
- detach-in-flight: the pod bound, then deleted with its claim, while the slowed detach is in flight.

Nothing may be lost: the pod ends bound on its node with a device the fabric says is attached there (outcome.py:
either binding model), with no allocation cleared by a failure condition or by the binding timeout, and once the
pod is gone nothing stays attached: the devices are detached and offered again within detachSeconds.

A binding timeout on the way is accepted only when the measured restart alone (with the slowed attach, the promised
attach and one PreBind poll) reaches the scheduler's bindingTimeout: then it is the cluster's doing, not a loss.

Each step is its own scenario (own node and lease); like every scenario that restarts the shared stack it runs alone
(exclusive=True, suite/exclusive.py), so no other scenario's verdict depends on a restart it did not cause; within a
step the roles are restarted one after another, each with its own pod and device.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import Role
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.slices import allocation_results, device_conditions
from conformance.observe.views import History
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go
from conformance.suite.scenario import Context, result_fixture, scenario

Step = Literal["before-attach", "attach-in-flight", "attached-unreported", "detach-in-flight"]
STEPS: tuple[Step, ...] = ("before-attach", "attach-in-flight", "attached-unreported", "detach-in-flight")
# Extra attach (or detach) time where the step needs the operation still in flight after the restart; short enough
# that a restart, the attach and (reschedule-to-local) the node-local republish fit in the suite's bindingTimeout.
SLOW_S = 4.0


@dataclass
class Restart:
    step: Step
    role: str
    node: str
    done: str = ""  # what the restart did (Implementation.restart_role)
    device: str = ""  # the physical device of the step
    at_kill: tuple[str, str] | None = None  # the probe's state of it when the restart began
    conditions_at_kill: dict[str, str] = field(default_factory=dict)
    walked: str = ""  # why the step was not walked ("" : it was)
    restart_s: float = 0.0
    binding_timeout_s: float = 0.0
    timeout_expected: bool = False  # the restart alone reaches the bindingTimeout
    outcome: Outcome | None = None
    let_go: LetGo | None = None  # after the pod was deleted


def _restart(
    ctx: Context, role: Role, seen: Restart, while_down: Callable[[], None] | None = None
) -> tuple[float, float]:
    """Restart the role; the restart's own start and end (time.time())."""
    window: list[float] = []
    seen.done = ctx.implementation.restart_role(role, window, while_down)
    began, ended = window
    seen.restart_s = round(ended - began, 3)
    ctx.measure("role_restart_seconds", seen.restart_s)
    return began, ended


def _conditions_at(history: History, at: float) -> dict[str, str]:
    """The binding conditions of the namespace's allocated claim as the record had them at `at`."""
    claims = [e.obj for e in history.events("claim") if e.at <= at and not e.deleted]
    claim = next((c for c in reversed(claims) if allocation_results(c)), None)
    if claim is None:
        return {}
    return {t: s for r in allocation_results(claim) for t, s in device_conditions(claim, r).items()}


def _one(ctx: Context, step: Step, role: Role) -> Restart:
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    node, lease, ns = ctx.remote_fabric(exclusive=ctx.counted)
    seen = Restart(step, role.name, node, binding_timeout_s=float(ctx.cluster.info.binding_timeout_s))
    injector = ctx.profile.fault_injector
    assert injector is not None  # faults=True
    faults = FaultInjector(
        ctx.implementation.resolve(injector.url),
        frozenset(lease.identities),
        frozenset({node}) if ctx.counted else frozenset(),
    )
    target: dict[str, Any] = {"node": node} if ctx.counted else {"device": lease.identities[0]}
    slow = SLOW_S if step in ("attach-in-flight", "detach-in-flight") else 0.0
    # attached-unreported, a process role: the attach hangs until the role is down, then completes (while_down)
    held = step == "attached-unreported" and role.process is not None
    with faults, ctx.history(ns) as history:
        fault = ""
        if step == "attach-in-flight":
            fault = faults.arm("slow", delaySeconds=SLOW_S, **target)
        elif held:
            fault = faults.arm("hang", **target)
        elif step == "attached-unreported":  # marks the attach (its hits name the device); adds almost nothing
            fault = faults.arm("slow", delaySeconds=0.1, **target)
        created = time.time()
        if step == "before-attach":
            seen.at_kill = next(iter(probe.now().get(i) for i in lease.identities), None) if lease.identities else None
            seen.device = lease.identities[0] if lease.identities else ""

            def create() -> None:
                ctx.objects.create(pinned_pod("app", "gpu", node), ns)

            if role.process is None:  # a restart command kills and starts in one: the pod comes right before it
                create()
            killed, _ = _restart(ctx, role, seen, create if role.process is not None else None)
            if ctx.counted:  # the attach of any device to the node must not have begun before the kill
                begun = [
                    i for s in probe.samples(created) if s.sent < killed for i, st in s.states.items() if st[0] == node
                ]
                seen.at_kill = (node, "attaching") if begun else None
            if seen.at_kill is not None:
                seen.walked = f"an attach had begun before the restart: {seen.at_kill}"
        else:
            ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        if step in ("attach-in-flight", "attached-unreported"):
            seen.device, _ = _attaching(ctx, faults, fault, node)

            def complete() -> None:
                """The role is down (killed, not started): the fabric's answer now is its state at the kill; then let
                the hung attach complete, and wait until the fabric says attached."""
                seen.at_kill = probe.after(time.time(), timeout=10).get(seen.device)
                faults.release_fault(fault)
                wait_for(
                    lambda: probe.now().get(seen.device),
                    lambda s: s == (node, "attached"),
                    timeout=ctx.profile.promises.attach_s + 10,
                    expected=f"the released attach of {seen.device} to complete on {node} (the probe to say so)",
                    interval=PROBE_PERIOD_S,
                    max_interval=PROBE_PERIOD_S,
                )

            killed, back = _restart(ctx, role, seen, complete if held else None)
            # Judged at the kill itself, from the record (held: read while the role was down, before the release).
            if not held:
                seen.at_kill = probe.after(killed, timeout=10).get(seen.device)
            seen.conditions_at_kill = _conditions_at(history, killed)
            if any(v == "True" for v in seen.conditions_at_kill.values()):
                seen.walked = f"the conditions were written before the restart: {seen.conditions_at_kill}"
            elif seen.at_kill is None or seen.at_kill[1] != "attaching":
                seen.walked = f"the attach of {seen.device} was not in flight at the restart: {seen.at_kill}"
            elif step == "attached-unreported":
                done = [s.sent for s in probe.samples(killed) if s.states.get(seen.device) == (node, "attached")]
                if not done or done[0] > back:
                    seen.walked = f"the attach of {seen.device} did not complete while {role.name} restarted"
        if step != "detach-in-flight":
            needed = seen.restart_s + slow + ctx.profile.promises.attach_s + PREBIND_POLL_S
            seen.timeout_expected = needed >= seen.binding_timeout_s
            wait = bind_timeout(ctx.profile, slow) + seen.restart_s + seen.binding_timeout_s
            seen.outcome = follow(ctx, history, node, wait)
        else:
            seen.outcome = follow(ctx, history, node, bind_timeout(ctx.profile))
            seen.device = next((i for i in seen.outcome.final_identities() if i), "") or lease.identities[0]
            detach = {"node": node} if ctx.counted else {"device": seen.device}
            faults.arm("slow", operation="detach", delaySeconds=SLOW_S, **detach)
            delete_pod(ctx, ns, history)
            seen.at_kill = wait_for(
                lambda: probe.now().get(seen.device),
                lambda s: s is None or s[1] == "detaching",
                timeout=ctx.profile.promises.detach_s,
                expected=f"the detach of {seen.device} from {node} to start (the probe to say detaching)",
                interval=PROBE_PERIOD_S,
                max_interval=PROBE_PERIOD_S,
            )
            if seen.at_kill is None:
                seen.walked = f"{seen.device} was detached before the restart could come"
            _restart(ctx, role, seen)
        released = time.monotonic()
        if step != "detach-in-flight":
            delete_pod(ctx, ns, history)
            released = time.monotonic()
        used = sorted({i for i in seen.outcome.final_identities() if i} | ({seen.device} - {""}))
        deadline = ctx.profile.promises.detach_s + (SLOW_S if step == "detach-in-flight" else 0.0)
        # Mid-detach, the role was down for the restart after the release: it could not detach meanwhile.
        down = seen.restart_s if step == "detach-in-flight" else 0.0
        seen.let_go = let_go(ctx, used, lease, released, deadline, down)
    return seen


def _attaching(ctx: Context, faults: FaultInjector, fault: str, node: str) -> tuple[str, tuple[str, str]]:
    """The device the fault hit, once the probe lists its attach."""
    probe = ctx.probe
    assert probe is not None

    def seen() -> tuple[str, tuple[str, str]] | None:
        hits = faults.hits(fault)
        state = probe.now().get(str(hits[0]["device"])) if hits else None
        return (str(hits[0]["device"]), state) if hits and state else None

    return wait_for(
        seen,
        bool,
        timeout=bind_timeout(ctx.profile),
        expected=f"the attach of the pod's device to {node} to start (the fault hit, the probe to list it)",
        interval=PROBE_PERIOD_S / 2,
        max_interval=PROBE_PERIOD_S,
    )


def _matrix(ctx: Context, step: Step) -> list[Restart]:
    return [_one(ctx, step, role) for role in ctx.profile.restartable()]


for _step in STEPS:

    def _run(ctx: Context, step: Step = _step) -> list[Restart]:  # type: ignore[assignment]
        return _matrix(ctx, step)

    scenario(
        f"restart-{_step}",
        f"each restartable role is restarted {_step.replace('-', ' ')}; nothing is lost",
        ("IMP-8",),
        probe=True,
        faults=True,
        controller=("process",),
        exclusive=True,  # it restarts the shared stack: other scenarios must not see that (suite/exclusive.py)
    )(_run)


before_attach = result_fixture("before_attach", "restart-before-attach")
attach_in_flight = result_fixture("attach_in_flight", "restart-attach-in-flight")
attached_unreported = result_fixture("attached_unreported", "restart-attached-unreported")
detach_in_flight = result_fixture("detach_in_flight", "restart-detach-in-flight")


@pytest.fixture(params=STEPS)
def restarts(request: pytest.FixtureRequest) -> Any:
    """One step's restarts (each role): a failed scenario fails the test through the plugin (ScenarioFailed)."""
    return request.getfixturevalue(str(request.param).replace("-", "_"))


def _walked(r: Restart) -> str:
    where = f"{r.step}, role {r.role} ({r.done})"
    return f"{where}: the step was not walked: {r.walked}" if r.walked else ""


@pytest.mark.requirement("IMP-8")
def test_the_pod_binds_by_an_allowed_path_after_the_restart(restarts: list[Restart]) -> None:
    problems = []
    for r in restarts:
        if msg := _walked(r):
            problems.append(msg)
            continue
        assert r.outcome is not None
        if r.step == "detach-in-flight":
            continue  # bound before the restart; judged by the let-go below
        found = r.outcome.binding_problems(timeouts=r.timeout_expected)
        if found:
            timing = f"the restart took {r.restart_s:.1f}s; bindingTimeout {r.binding_timeout_s:g}s" + (
                " (a timeout on the way was accepted: the restart alone reaches it)" if r.timeout_expected else ""
            )
            problems.append(f"{r.step}, role {r.role}: " + "; ".join(found) + f"\n  {r.outcome.describe()}\n  {timing}")
    assert not problems, "\n".join(problems)


@pytest.mark.requirement("IMP-8")
def test_nothing_stays_attached_after_the_restart(restarts: list[Restart]) -> None:
    problems = [f"{r.step}, role {r.role}: {p}" for r in restarts if r.let_go and (p := r.let_go.problem())]
    assert not problems, "\n".join(problems)
