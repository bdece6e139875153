"""IMP-8 as a matrix: every restartable role of the stack (Profile.restartable(): a process the suite kills with
SIGKILL and starts again, or a declared restart command) restarted at every step of a device's life:

- before-attach: the role is killed, the pod created while it is down, and the role started again: its restart
  began before any attach of the pod's device could (a role that attaches attaches only once it is back; a restart
  command kills and starts in one, so there the pod is created right before it);
- attach-in-flight: while an attach of the pod's device is in flight: a `hang` fault holds it until the role is
  back, then the suite lets it complete;
- attached-unreported: while an attach is in flight, so that it completes while the role is down: the stack comes
  back to a device attached with no condition written yet. A process role: the attach hangs, and is let complete
  between the kill and the start (the fabric says attached before the role starts again), so the step is walked
  in every run; a role with a restart command: a short attach that completes while the command runs, by timing
  (the step is checked from the record, and fails "not walked" when the timing missed it);
- detach-in-flight: the pod bound, then deleted with its claim; a `hang` fault holds the detach in flight across the
  restart, and the suite lets it complete once the role is back.

Nothing may be lost: the pod ends bound on its node with a device the fabric says is attached there (outcome.py:
either binding model), with no allocation cleared by a failure condition or by the binding timeout, and once the
pod is gone nothing stays attached: the devices are detached and offered again within detachSeconds (plus the time
the suite itself held the detach in flight).

A binding timeout on the way is accepted only when the time the suite held the pod's attach back (its hang and the
restart; before-attach: the restart), the promised attach and one PreBind poll reach the scheduler's bindingTimeout:
then it is the suite's doing, not a loss.

One restart serves the four steps: each is staged to its kill point side by side, on its own node where the faults
select by node (count-based pools), with its own pod, device, namespace and faults; then the role is killed once,
what each step needs done while it is down is done, it is started, and each step follows its outcome. The detach
step is staged first (its detach begins only after the implementation's idle time), the attaches last, so that
they are held no longer than needed (the bindingTimeout counts meanwhile). Where fewer such nodes or devices are
free than steps, or the profile's fabricConcurrency allows fewer operations at once, the steps go in batches of what
fits, one restart each. The roles are restarted one after another.
The scenario restarts the shared stack, so it runs alone (exclusive=True, suite/exclusive.py): no other scenario's
verdict depends on a restart it did not cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import Role
from conformance.observe.devices import Lease
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.slices import allocation_results, device_conditions
from conformance.observe.views import History
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow, outcome
from conformance.suite.implementation.settle import LetGo, attaching, delete_pod, let_go
from conformance.suite.scenario import Context, ScenarioFailed, result_fixture, scenario

Step = Literal["before-attach", "attach-in-flight", "attached-unreported", "detach-in-flight"]
STEPS: tuple[Step, ...] = ("before-attach", "attach-in-flight", "attached-unreported", "detach-in-flight")
ATTACHES: tuple[Step, ...] = ("attach-in-flight", "attached-unreported")


@dataclass
class Restart:
    step: Step
    role: str
    node: str
    done: str = ""  # what the restart did (Implementation.restart_role)
    together: tuple[Step, ...] = ()  # the steps this one restart served
    device: str = ""  # the physical device of the step
    at_kill: tuple[str, str] | None = None  # the probe's state of it when the restart began
    conditions_at_kill: dict[str, str] = field(default_factory=dict)
    walked: str = ""  # why the step was not walked ("" : it was)
    restart_s: float = 0.0
    held_s: float = 0.0  # how long the suite held the step's attach back (its hang, the restart), or its detach
    binding_timeout_s: float = 0.0
    timeout_expected: bool = False  # what the suite held back alone reaches the bindingTimeout
    outcome: Outcome | None = None
    unbound: str = ""  # the wait's message when the pod did not bind in time
    let_go: LetGo | None = None  # after the pod was deleted


@dataclass
class _Staged:
    """One step of a restart: its own lease, namespace, record view and faults."""

    seen: Restart
    lease: Lease
    ns: str
    history: History
    faults: FaultInjector
    target: dict[str, Any]  # what its faults select: its node (count-based) or its device
    fault: str = ""  # the fault holding (or marking) its operation
    began: float = 0.0  # time.time(): its attach was seen in flight (before-attach: its pod created)
    ended: float = 0.0  # time.time(): the suite stopped holding it back
    released: float = 0.0  # time.monotonic(): its pod and claim deleted
    held_from: float = 0.0  # time.monotonic(): detach-in-flight: its detach seen held
    let_on: float = 0.0  # time.monotonic(): detach-in-flight: its held detach let go


def _conditions_at(history: History, at: float) -> dict[str, str]:
    """The binding conditions of the namespace's allocated claim as the record had them at `at`."""
    claims = [e.obj for e in history.events("claim") if e.at <= at and not e.deleted]
    claim = next((c for c in reversed(claims) if allocation_results(c)), None)
    if claim is None:
        return {}
    return {t: s for r in allocation_results(claim) for t, s in device_conditions(claim, r).items()}


def _batches(ctx: Context) -> list[tuple[Step, ...]]:
    """The steps in groups that can be staged side by side: one lease each, count-based a node each, and no more
    operations held in flight at once than the profile's fabricConcurrency (a stack that runs one fabric operation
    at a time would queue the next attach behind a held one)."""
    nodes = ctx.remote_nodes()  # owed: waited for up to the promise, else the scenario fails with the cause
    room = min(len(nodes), ctx.pool.count("fabric")) if ctx.counted else ctx.pool.count("fabric", nodes[0])
    size = max(1, min(len(STEPS), room, ctx.profile.fabric_concurrency or len(STEPS)))
    return [STEPS[i : i + size] for i in range(0, len(STEPS), size)]


def _stage(ctx: Context, stack: ExitStack, step: Step, role: Role) -> _Staged:
    node, lease, ns = ctx.remote_fabric(exclusive=ctx.counted, part=step)
    injector = ctx.profile.fault_injector
    assert injector is not None  # faults=True
    faults = FaultInjector(
        ctx.implementation.resolve(injector.url),
        frozenset(lease.identities),
        frozenset({node}) if ctx.counted else frozenset(),
    )
    stack.enter_context(faults)
    history = stack.enter_context(ctx.history(ns))
    seen = Restart(step, role.name, node, binding_timeout_s=float(ctx.cluster.info.binding_timeout_s))
    target: dict[str, Any] = {"node": node} if ctx.counted else {"device": lease.identities[0]}
    return _Staged(seen, lease, ns, history, faults, target)


def _detach_held(ctx: Context, s: _Staged) -> None:
    """detach-in-flight up to its kill point: the pod bound, deleted with its claim, its detach held in flight."""
    probe = ctx.probe
    assert probe is not None
    node = s.seen.node
    ctx.objects.create(pinned_pod("app", "gpu", node), s.ns)
    if not _follow_for(ctx, s, bind_timeout(ctx.profile)):
        s.seen.walked = f"the pod did not bind before the restart: {s.seen.unbound}"
        delete_pod(ctx, s.ns, s.history)
        s.released = time.monotonic()
        return
    assert s.seen.outcome is not None
    s.seen.device = next((i for i in s.seen.outcome.final_identities() if i), "") or s.lease.identities[0]
    detach = {"node": node} if ctx.counted else {"device": s.seen.device}
    s.fault = s.faults.arm("hang", operation="detach", **detach)
    delete_pod(ctx, s.ns, s.history)
    s.released = time.monotonic()
    s.seen.at_kill = wait_for(
        lambda: probe.now().get(s.seen.device),
        lambda state: state is None or state[1] == "detaching",
        timeout=ctx.profile.promises.detach_s,
        expected=f"the detach of {s.seen.device} from {node} to start (the probe to say detaching)",
        interval=PROBE_PERIOD_S,
        max_interval=PROBE_PERIOD_S,
    )
    s.held_from = time.monotonic()
    if s.seen.at_kill is None:
        s.seen.walked = f"{s.seen.device} was detached before the restart could come"


def _restart(
    ctx: Context, role: Role, staged: list[_Staged], while_down: Callable[[], None] | None
) -> tuple[float, float]:
    """Restart the role once for every staged step; the restart's own start and end (time.time())."""
    window: list[float] = []
    done = ctx.implementation.restart_role(role, window, while_down)
    began, ended = window
    for s in staged:
        s.seen.done, s.seen.restart_s = done, round(ended - began, 3)
    ctx.measure("role_restart_seconds", round(ended - began, 3))
    return began, ended


def _batch(ctx: Context, role: Role, steps: tuple[Step, ...]) -> list[Restart]:
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    process = role.process is not None
    with ExitStack() as stack:
        staged = {step: _stage(ctx, stack, step, role) for step in steps}
        for s in staged.values():
            s.seen.together = steps
        if held_detach := staged.get("detach-in-flight"):
            _detach_held(ctx, held_detach)
        attaches = [staged[step] for step in ATTACHES if step in staged]
        for s in attaches:
            # A restart command cannot let a hung attach go while the role is down: there attached-unreported
            # marks a short attach timed to complete while the command runs (adds almost nothing).
            held = s.seen.step == "attach-in-flight" or process
            s.fault = s.faults.arm("hang", **s.target) if held else s.faults.arm("slow", delaySeconds=0.1, **s.target)
            ctx.objects.create(pinned_pod("app", "gpu", s.seen.node), s.ns)
        others = len(attaches) - 1 + int(held_detach is not None and bool(held_detach.fault))
        for s in attaches:
            s.seen.device = attaching(ctx, s.faults, s.fault, s.seen.node, bind_timeout(ctx.profile), others)
            s.began = time.time()
        first = staged.get("before-attach")
        if first is not None:
            ids = first.lease.identities
            first.seen.device = ids[0] if ids else ""
            first.seen.at_kill = probe.now().get(first.seen.device) if ids else None
            first.began = time.time()
            if not process:  # a restart command kills and starts in one: the pod comes right before it
                ctx.objects.create(pinned_pod("app", "gpu", first.seen.node), first.ns)
        unreported = staged.get("attached-unreported") if process else None

        def while_down() -> None:
            """The role is down (killed, not started): create the before-attach pod, read the fabric's answer for
            each attach in flight (its state at the kill), then let attached-unreported's hung attach complete and
            wait until the fabric says attached."""
            now = time.time()
            if first is not None:
                first.began = now
                ctx.objects.create(pinned_pod("app", "gpu", first.seen.node), first.ns)
            for s in attaches:
                s.seen.at_kill = probe.after(now, timeout=10).get(s.seen.device)
            if unreported is not None:
                unreported.faults.release_fault(unreported.fault)
                wait_for(
                    lambda: probe.now().get(unreported.seen.device),
                    lambda state: state == (unreported.seen.node, "attached"),
                    timeout=ctx.profile.promises.attach_s + 10,
                    expected=f"the released attach of {unreported.seen.device} to complete on "
                    f"{unreported.seen.node} (the probe to say so)",
                    interval=PROBE_PERIOD_S,
                    max_interval=PROBE_PERIOD_S,
                )

        killed, back = _restart(ctx, role, list(staged.values()), while_down if process else None)
        for s in staged.values():  # what the suite held across the restart goes on now
            s.ended = back
            if s.seen.step in ("attach-in-flight", "detach-in-flight") and s.fault:
                s.faults.release_fault(s.fault)
                s.ended, s.let_on = time.time(), time.monotonic()
        _judge_at_kill(ctx, staged, killed, back, process)
        # Each let-go is watched from its pod's release on, side by side (it reads only the record and the probe):
        # watched one after another, a let-go would be seen late and counted late.
        with ThreadPoolExecutor(len(staged), thread_name_prefix="let-go") as watching:
            going: dict[Step, Future[LetGo]] = {}
            if held_detach is not None:
                going["detach-in-flight"] = watching.submit(_let_go, ctx, held_detach)
            for s in staged.values():
                if s is not held_detach:
                    _follow(ctx, s)
            for s in staged.values():
                if s is not held_detach:
                    delete_pod(ctx, s.ns, s.history)
                    s.released = time.monotonic()
                    going[s.seen.step] = watching.submit(_let_go, ctx, s)
            for step, future in going.items():
                staged[step].seen.let_go = future.result()
        for s in staged.values():  # the next batch may need the same nodes
            ctx.pool.release(s.lease)
        return [s.seen for s in staged.values()]


def _follow(ctx: Context, s: _Staged) -> None:
    """The pod's outcome after the restart; a timeout on the way is accepted only when what the suite held back
    alone reaches the bindingTimeout."""
    s.seen.held_s = round(s.ended - s.began, 3)
    needed = s.seen.held_s + ctx.profile.promises.attach_s + PREBIND_POLL_S
    s.seen.timeout_expected = needed >= s.seen.binding_timeout_s
    _follow_for(ctx, s, bind_timeout(ctx.profile) + s.seen.held_s + s.seen.binding_timeout_s)


def _follow_for(ctx: Context, s: _Staged, timeout: float) -> bool:
    """Follow the step's pod until bound; unbound, its outcome as recorded and the wait's message (a step's failure
    is its own: the other steps of the restart go on and are judged)."""
    try:
        s.seen.outcome = follow(ctx, s.history, s.seen.node, timeout)
        return True
    except WaitTimeout as exc:
        s.seen.outcome, s.seen.unbound = outcome(ctx, s.history, s.seen.node), str(exc)
        return False


def _let_go(ctx: Context, s: _Staged) -> LetGo:
    """The step's devices detached and offered again within detachSeconds of its pod's release (detach-in-flight:
    plus the time the suite held its begun detach, across the restart: a held detach cannot complete)."""
    assert s.seen.outcome is not None
    used = sorted({i for i in s.seen.outcome.final_identities() if i} | ({s.seen.device} - {""}))
    used = used or sorted(s.lease.identities)  # unbound, no attach seen: the leased device must still be let go
    held = max(0.0, s.let_on - s.held_from) if s.seen.step == "detach-in-flight" else 0.0
    if held:
        s.seen.held_s = round(held, 3)
    return let_go(ctx, used, s.lease, s.released, ctx.profile.promises.detach_s, held)


def _judge_at_kill(ctx: Context, staged: dict[Step, _Staged], killed: float, back: float, process: bool) -> None:
    """Was each step walked? Judged at the kill itself, from the record (a process role's attaches: read while the
    role was down)."""
    probe = ctx.probe
    assert probe is not None
    first = staged.get("before-attach")
    if first is not None:
        if ctx.counted:  # the attach of any device to the node must not have begun before the kill
            node = first.seen.node
            begun = [
                i
                for sample in probe.samples(first.began)
                if sample.sent < killed
                for i, state in sample.states.items()
                if state[0] == node
            ]
            first.seen.at_kill = (node, "attaching") if begun else None
        if first.seen.at_kill is not None:
            first.seen.walked = f"an attach had begun before the restart: {first.seen.at_kill}"
    for step in ATTACHES:
        s = staged.get(step)
        if s is None:
            continue
        seen = s.seen
        if not process:
            seen.at_kill = probe.after(killed, timeout=10).get(seen.device)
        seen.conditions_at_kill = _conditions_at(s.history, killed)
        if any(v == "True" for v in seen.conditions_at_kill.values()):
            seen.walked = f"the conditions were written before the restart: {seen.conditions_at_kill}"
        elif seen.at_kill is None or seen.at_kill[1] != "attaching":
            seen.walked = f"the attach of {seen.device} was not in flight at the restart: {seen.at_kill}"
        elif step == "attached-unreported":
            done = [x.sent for x in probe.samples(killed) if x.states.get(seen.device) == (seen.node, "attached")]
            if not done or done[0] > back:
                seen.walked = f"the attach of {seen.device} did not complete while {seen.role} restarted"


def _matrix(ctx: Context) -> list[Restart]:
    batches = _batches(ctx)
    return [r for role in ctx.profile.restartable() for steps in batches for r in _batch(ctx, role, steps)]


scenario(
    "restart",
    "each restartable role is restarted once with a device at each step of its life (before the attach, attach "
    "in flight, attached but unreported, detach in flight); nothing is lost",
    ("IMP-8",),
    probe=True,
    faults=True,
    controller=("process",),
    exclusive=True,  # it restarts the shared stack: other scenarios must not see that (suite/exclusive.py)
)(_matrix)


restart_matrix = result_fixture("restart_matrix", "restart")


@pytest.fixture(params=STEPS)
def restarts(request: pytest.FixtureRequest, restart_matrix: Any) -> Any:
    """One step's restarts (each role): a failed scenario fails the test through the plugin (ScenarioFailed)."""
    if isinstance(restart_matrix, ScenarioFailed):
        return restart_matrix
    return [r for r in restart_matrix if r.step == request.param]


def _walked(r: Restart) -> str:
    where = f"{r.step}, role {r.role} ({r.done}; one restart for {', '.join(r.together)})"
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
        found = ([r.unbound] if r.unbound else []) + r.outcome.binding_problems(timeouts=r.timeout_expected)
        if found:
            timing = (
                f"the restart took {r.restart_s:.1f}s, the suite held the attach back {r.held_s:.1f}s; "
                f"bindingTimeout {r.binding_timeout_s:g}s"
                + (
                    " (a timeout on the way was accepted: what the suite held back reaches it)"
                    if r.timeout_expected
                    else ""
                )
            )
            problems.append(f"{r.step}, role {r.role}: " + "; ".join(found) + f"\n  {r.outcome.describe()}\n  {timing}")
    assert not problems, "\n".join(problems)


@pytest.mark.requirement("IMP-8")
def test_nothing_stays_attached_after_the_restart(restarts: list[Restart]) -> None:
    problems = [f"{r.step}, role {r.role}: {p}" for r in restarts if r.let_go and (p := r.let_go.problem())]
    assert not problems, "\n".join(problems)
