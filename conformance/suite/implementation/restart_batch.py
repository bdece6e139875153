"""One restart of a role over a staged batch of IMP-8's cells (restart_staging.py): the role killed, what a cell needs
done while it is down (a process role: pods created or deleted, a claim allocated, a held attach let complete) done,
the role started; then each cell follows its outcome (bound, kept attached, let go; was it walked: restart_walked.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

from conformance.cluster.manifests import held_at_gate, pinned_pod
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.profile import Role
from conformance.observe.attachments import stamp
from conformance.observe.devices import incomplete_pools
from conformance.observe.moves import judge_move
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.cause import in_one_line
from conformance.suite.implementation.context import Context
from conformance.suite.implementation.outcome import bind_timeout, follow, outcome
from conformance.suite.implementation.restart_cells import Cell, Restart
from conformance.suite.implementation.restart_paths import (
    DETACH_STEPS,
    FAILURE_STEPS,
    after_restart,
    detached_while_down,
    failed_while_down,
    failure_let_go,
    hold_detach,
    hold_failures,
    judge_failure,
    let_go_window,
    note_held_back,
    offered_after,
)
from conformance.suite.implementation.restart_staging import (
    ATTACHES,
    BOUND_FIRST,
    Staged,
    bound_first,
    hold_attaches,
    move_to_b,
    stage,
    wait_probe,
)
from conformance.suite.implementation.restart_walked import came_back, claim_state, fabric_state
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go


def _restart(
    ctx: Context, role: Role, staged: list[Staged], while_down: Callable[[], None] | None
) -> tuple[float, float]:
    """Restart the role once for every staged cell; the restart's own start and end (time.time())."""
    window: list[float] = []
    done = ctx.implementation.restart_role(role, window, while_down)
    began, ended = window
    for s in staged:
        s.seen.done, s.seen.restart_s = done, round(ended - began, 3)
    ctx.measure("role_restart_seconds", round(ended - began, 3))
    return began, ended


def _while_down(ctx: Context, staged: dict[str, Staged], came: list[float]) -> Callable[[], None]:
    """What the cells need done while a process role is down (killed, not started); `came` gets the moment the role
    is started (what it comes back to is read there)."""
    probe = ctx.probe
    assert probe is not None

    def run() -> None:
        now = time.time()
        for s in staged.values():  # the state at the kill, before anything is done while the role is down
            if not s.seen.walked:
                s.kill_seen = (claim_state(s.history, now), fabric_state(ctx, s, now))
        if s := staged.get("allocated-free"):
            s.began = time.time()
            ctx.objects.create(pinned_pod("app", "gpu", s.seen.node), s.ns)
        if (s := staged.get("released-attached")) and not s.seen.walked:
            delete_pod(ctx, s.ns, s.history)
            s.released = time.monotonic()
        if (s := staged.get("move-attached-a")) and s.history_a is not None and not s.seen.walked:
            delete_pod(ctx, s.ns_a, s.history_a)
            s.began = time.time()
            ctx.objects.create(pinned_pod("app", "gpu", s.seen.node_b), s.ns)
        if (s := staged.get("allocated-attached")) is not None:
            s.faults.release_fault(s.fault)
            node, device = s.seen.node, s.seen.device
            wait_probe(
                ctx,
                device,
                lambda st: st == (node, "attached"),
                ctx.profile.promises.attach_s + 10,
                f"the released attach of {device} to complete on {node} (the probe to say so)",
            )
        if (s := staged.get("released-detached")) and not s.seen.walked:
            detached_while_down(ctx, s)
        if (s := staged.get("failed-seen")) and not s.seen.walked:
            failed_while_down(ctx, s)
        if s := staged.get("allocated-free"):
            _down_wait(ctx, s, s.history, lambda h: h.allocations(), "its claim allocated")
        if (s := staged.get("released-attached")) and not s.seen.walked:
            _down_wait(ctx, s, s.history, _claim_going, "its claim deleted")
        s = staged.get("move-attached-a")
        if (
            s
            and s.history_a is not None
            and not s.seen.walked
            and _down_wait(ctx, s, s.history_a, _claim_going, "A's claim deleted")
        ):
            _down_wait(ctx, s, s.history, _tried, "the pod on B tried by the scheduler")
        if s := staged.get("pending-free"):  # last: its claim is still pending when the role starts
            s.began = time.time()
            ctx.objects.create(pinned_pod("app", "gpu", s.seen.node), s.ns)
        came.append(time.time())

    return run


def _down_wait(ctx: Context, s: Staged, history: History, done: Callable[[History], Any], what: str) -> bool:
    """Wait for what the cell needs the cluster to do while the role is down. Not done in time, the cell is not
    walked (staged again: restart_cells.STAGINGS) with why: a stack killed while publishing a pool in several slices
    leaves it incomplete, and the scheduler allocates from no incomplete pool until the stack is back; a claim may
    carry the stack's finalizer. Neither is the stack's fault, nor the scenario's end."""
    try:
        history.wait(done, timeout=SCHEDULE_S, expected=f"{what} (role down)")
        return True
    except WaitTimeout as exc:
        why = in_one_line(ctx, str(exc), s.began or time.time() - SCHEDULE_S, {history.namespace})
        pools = _half_published(ctx, s)
        if pools:
            why = (
                f"pool {', '.join(pools)} was left incomplete by the kill (its newest generation lacks slices): the "
                f"scheduler allocates from no incomplete pool until the stack publishes it whole; {why}"
            )
        s.seen.walked = f"not {what} while {s.seen.role} was down: {why}"
        return False


def _half_published(ctx: Context, s: Staged) -> list[str]:
    """The pools of the cell's leased devices (else of the driver) whose newest generation lacks slices now."""
    if ctx.invariants is None:
        return []
    driver = ctx.invariants.driver
    pools = incomplete_pools([x for x in ctx.invariants.record.live("slice") if x["spec"]["driver"] == driver])
    leased = {pool for d in s.lease.devices for pool, _ in d.copies}
    return [p for p in pools if p in leased] or pools


def _lift_gate(ctx: Context, ns: str, pod: str) -> None:
    """Let the scheduler have a pod held at the suite's scheduling gate (manifests.held_at_gate)."""
    ctx.cluster.core.patch_namespaced_pod(pod, ns, [{"op": "remove", "path": "/spec/schedulingGates"}])


def _claim_going(h: History) -> bool:
    """The namespace's claim is gone, or being deleted (a stack's finalizer may hold it until the stack is back)."""
    return all((c.get("metadata") or {}).get("deletionTimestamp") for c in h.latest("claim").values())


def _tried(h: History) -> bool:
    """The scheduler has tried the namespace's pod: its claim allocated, or the pod said unschedulable."""
    unschedulable = any(c["type"] == "PodScheduled" and c["status"] == "False" for c in h.pod_conditions())
    return bool(h.allocations()) or unschedulable


def run_batch(ctx: Context, role: Role, cells: list[Cell], n: int, attempt: int = 1) -> list[Restart]:
    """One restart of `role` over `cells` staged side by side (`attempt`: the how-manyth staging of these cells)."""
    process = role.process is not None
    with ExitStack() as stack:
        staged = {cell.name: stage(ctx, stack, cell, role, n) for cell in cells}
        for s in staged.values():
            s.seen.attempt = attempt
        skipped = [s.seen for s in staged.values() if s.seen.skipped]
        staged = {name: s for name, s in staged.items() if not s.seen.skipped}
        for s in staged.values():
            s.seen.together = tuple(staged)
        first = [s for name, s in staged.items() if name in BOUND_FIRST]
        if first:
            with ThreadPoolExecutor(len(first), thread_name_prefix="restart-stage") as staging:
                list(staging.map(lambda s: _bound(ctx, s), first))
        holding = sum(1 for s in first if s.fault)
        # After the slowest of the first ones, not beside them: its state lasts only the bindingTimeout (not before
        # the held attaches either: multi-one-attaching's others stay attached only the idle grace on reschedule).
        if (s := staged.get("move-attaching-b")) and not s.seen.walked:
            move_to_b(ctx, s, holding)
            holding += 1
        hold_attaches(ctx, [s for name, s in staged.items() if name in ATTACHES], holding)
        # Last: failed-reported's restart must follow its report at once.
        hold_failures(ctx, [s for name, s in staged.items() if name in FAILURE_STEPS])
        came: list[float] = []
        gated = None if process else staged.get("pending-free")
        if gated is not None:  # a restart command kills and starts in one: the pod waits at a gate until it returned
            gated.began = time.time()
            ctx.objects.create(held_at_gate(pinned_pod("app", "gpu", gated.seen.node)), gated.ns)
        killed, back = _restart(ctx, role, list(staged.values()), _while_down(ctx, staged, came) if process else None)
        if gated is not None:
            _lift_gate(ctx, gated.ns, "app")
        for s in staged.values():  # what the suite held across the restart goes on now
            s.ended = back
            if s.cell.path in ("detach", "failure") and not s.cell.grid:
                after_restart(s)
            elif s.fault and s.seen.cell != "allocated-attached":
                s.faults.release_fault(s.fault)
                s.ended, s.let_on = time.time(), time.monotonic()
        back_mono = time.monotonic() - max(0.0, time.time() - back)
        for s in staged.values():
            note_held_back(ctx, s, back_mono)
        came_back(ctx, staged, killed, came[0] if came else killed, back, process)
        # Each let-go is watched from its pod's release on, side by side (it reads only the record and the probe).
        with ThreadPoolExecutor(len(staged), thread_name_prefix="let-go") as watching:
            going: dict[str, Future[LetGo]] = {}
            for name, s in staged.items():
                if s.cell.owed == "let-go" and s.released:
                    going[name] = watching.submit(_let_go, ctx, s, back_mono, (killed, back))
            for s in staged.values():
                if s.cell.owed == "bind" and not s.seen.walked:
                    _follow(ctx, s)
                elif s.cell.owed == "report" and not s.seen.walked:
                    judge_failure(ctx, s, killed, back)
            for s in staged.values():
                if s.cell.owed == "keep" and not s.seen.walked:
                    _keep(ctx, s, killed, back + ctx.profile.promises.attach_s)
            for name, s in staged.items():
                if s.cell.owed != "let-go":
                    for ns, history in ((s.ns_a, s.history_a), (s.ns, s.history)):
                        if history is not None and history.latest("pod"):  # a move's pod on A went before
                            delete_pod(ctx, ns, history)
                    s.released = time.monotonic()
                    going[name] = watching.submit(_let_go, ctx, s, back_mono, (killed, back))
            for name, future in going.items():
                staged[name].seen.let_go = future.result()
        for s in staged.values():  # the next batch may need the same nodes
            ctx.pool.release(s.lease)
        return [s.seen for s in staged.values()] + skipped


def _follow(ctx: Context, s: Staged) -> None:
    """The pod's outcome after the restart; a timeout on the way is accepted only when what the suite held back
    alone reaches the bindingTimeout. A move: judged from the binding on A (the device leaves A before B)."""
    s.seen.held_s = round(s.ended - s.began, 3)
    needed = s.seen.held_s + ctx.profile.promises.attach_s + PREBIND_POLL_S
    s.seen.timeout_expected = needed >= s.seen.binding_timeout_s
    extra = ctx.profile.promises.detach_s if s.cell.move else 0.0
    timeout = bind_timeout(ctx.profile, extra + (s.count - 1) * ctx.profile.promises.attach_s)
    try:
        s.seen.outcome = follow(ctx, s.history, s.pod_node, timeout + s.seen.held_s + s.seen.binding_timeout_s)
    except WaitTimeout as exc:
        s.seen.outcome = outcome(ctx, s.history, s.pod_node)
        s.seen.unbound = in_one_line(ctx, str(exc), s.began, {s.history.namespace})
    if s.cell.move and ctx.probe is not None and s.seen.outcome.final is not None:
        moved = next((i for i in s.seen.outcome.final_identities() if i), s.seen.device)
        s.seen.move_path, s.seen.move_problems = judge_move(ctx.probe.samples(s.bound_a), moved, s.seen.node_b)
        if not any(s.seen.node_b in p for p in s.seen.move_path):
            s.seen.move_problems.append(f"the probe never listed {moved} on {s.seen.node_b}")
        if s.seen.move_problems:
            s.seen.move_problems.append("its path: " + "; ".join(s.seen.move_path))


def _keep(ctx: Context, s: Staged, killed: float, until: float) -> None:
    """A bound pod's device across the restart: every probe answer from the kill until the pod goes (and at least
    until the promised attach time after the restart, in which a restarted stack acts) shows it attached there."""
    probe = ctx.probe
    assert probe is not None
    node, device = s.seen.node, s.seen.device
    wait_for(
        lambda: probe.now().get(device),
        lambda st: st != (node, "attached") or time.time() >= until,
        timeout=max(0.0, until - time.time()) + PROBE_PERIOD_S * 4,
        expected=f"{device} seen attached to {node} until {stamp(until)} (or a change)",
        interval=PROBE_PERIOD_S,
        max_interval=PROBE_PERIOD_S,
    )
    bad = [x for x in probe.samples(killed) if x.states.get(device) != (node, "attached")]
    s.seen.kept = [f"the probe answer sent {stamp(x.sent)} says {device}: {x.states.get(device)}" for x in bad[:3]]


def _bound(ctx: Context, s: Staged) -> None:
    """A cell that begins with a bound pod, up to its kill point (the detach path's own steps: restart_paths.py)."""
    bound_first(ctx, s)
    if s.seen.cell in DETACH_STEPS and not s.seen.walked:
        hold_detach(ctx, s)


def _let_go(ctx: Context, s: Staged, back: float, restart: tuple[float, float]) -> LetGo:
    """The cell's devices detached and offered again within detachSeconds of its pod's release, plus what the suite
    held: a held detach (released-detaching), the role down after the release (released-attached); a released attach
    the suite let go (released-attaching) first has to end (attachSeconds); the detach path's own steps and the
    failure path's pods: restart_paths.py. `restart`: the restart's start and end (time.time())."""
    if s.cell.failure:
        return failure_let_go(ctx, s)
    if s.seen.cell in DETACH_STEPS:
        since, held = let_go_window(s, back)
        if held:
            s.seen.held_s = round(held, 3)
        went = let_go(ctx, [s.seen.device], s.lease, since, ctx.profile.promises.detach_s, held)
        if s.seen.cell == "released-offered":  # and it stays so while a restarted stack acts
            offered_after(ctx, s, *restart)
        return went
    seen = s.seen.outcome
    used = {i for i in (seen.final_identities() if seen else []) if i} | ({s.seen.device} - {""})
    used = used or set(s.lease.identities)  # unbound, no attach seen: the leased device must still be let go
    since, deadline, held = s.released, ctx.profile.promises.detach_s, 0.0
    if s.seen.cell == "released-detaching":
        held = max(0.0, s.let_on - s.held_from)
    elif s.seen.cell == "released-attached":
        held = max(0.0, back - s.released)
    elif s.seen.cell == "released-attaching":
        since, deadline = s.let_on, deadline + ctx.profile.promises.attach_s
    if held:
        s.seen.held_s = round(held, 3)
    return let_go(ctx, sorted(used), s.lease, since, deadline, held)
