"""Whether each cell of an IMP-8 restart was walked: the claim's state (from the record) and the fabric's (from the
probe) at the role's kill, against the cell's (restart_cells.AT_KILL), and what the role came back to."""

from __future__ import annotations

from conformance.observe.slices import allocation_results, device_conditions
from conformance.observe.views import History
from conformance.suite.implementation.context import Context
from conformance.suite.implementation.restart_cells import AT_KILL
from conformance.suite.implementation.restart_paths import walked as path_walked
from conformance.suite.implementation.restart_staging import Staged


def claim_state(history: History, at: float) -> str:
    """The namespace's claim as the record had it at `at`: pending, allocated, ready (bound, or every binding
    condition True) or released."""
    claims = [e for e in history.events("claim") if e.at <= at]
    pods = [e for e in history.events("pod") if e.at <= at]
    if (claims and claims[-1].deleted) or (pods and pods[-1].deleted):
        return "released"
    if not claims or not allocation_results(claims[-1].obj):
        return "pending"
    claim = claims[-1].obj
    if pods and (pods[-1].obj.get("spec") or {}).get("nodeName"):
        return "ready"
    wanted = [(r, set(r.get("bindingConditions") or ())) for r in allocation_results(claim)]
    true = all(all(device_conditions(claim, r).get(t) == "True" for t in ts) for r, ts in wanted if ts)
    return "ready" if true and any(ts for _, ts in wanted) else "allocated"


def fabric_state(ctx: Context, s: Staged, at: float) -> str:
    """The fabric's state of the cell's device(s) in the probe's first answer sent at or after `at`, in the cell's
    words (count-based without a known device: what is on the cell's node)."""
    probe = ctx.probe
    assert probe is not None
    states = probe.after(at, timeout=10)
    if s.cell.multi:
        ours = [st for i, st in states.items() if st[0] == s.seen.node and (ctx.counted or i in s.lease.identities)]
        attaching = sum(1 for st in ours if st[1] == "attaching")
        attached = sum(1 for st in ours if st[1] == "attached")
        if attaching == 1 and attached == s.count - 1:
            return "one attaching, the others attached"
        return f"{attaching} attaching, {attached} attached"
    if not s.seen.device:
        on_node = sorted(st[1] for st in states.values() if st[0] == s.seen.node)
        return on_node[0] if len(on_node) == 1 else "free" if not on_node else f"{on_node} on {s.seen.node}"
    state = states.get(s.seen.device)
    if state is None:
        return "free"
    if s.cell.move:
        where = {s.seen.node: "A", s.seen.node_b: "B"}.get(state[0], state[0])
        return f"{state[1]} {'to' if state[1] == 'attaching' else 'from' if state[1] == 'detaching' else 'to'} {where}"
    return state[1] if state[0] == s.seen.node else f"{state[1]} on {state[0]}"


def came_back(ctx: Context, staged: dict[str, Staged], killed: float, came: float, back: float, process: bool) -> None:
    """Was each cell walked? The claim and the fabric at the kill, from the record and the probe (AT_KILL), and what
    was staged while the role was down done before its start; what the role was started with is kept for the report
    (another role of the stack may act meanwhile)."""
    probe = ctx.probe
    assert probe is not None
    for name, s in staged.items():
        if s.seen.walked:
            continue
        claim, fabric = s.kill_seen or (claim_state(s.history, killed), fabric_state(ctx, s, killed))
        s.seen.at_kill_seen = (claim, fabric)
        s.seen.conditions_at_kill = _conditions_at(s.history, killed)
        s.seen.came_back_to = (claim_state(s.history, came), fabric_state(ctx, s, came)) if process else None
        want = AT_KILL[name]
        if want[0] not in ("*", claim) or fabric != want[1]:
            s.seen.walked = (
                f"at the kill the claim was {claim}, the fabric {fabric}: the cell needs {want[0]} x {want[1]}"
            )
        elif name == "pending-free" and ctx.counted:  # no attach to its node begun before the restart
            if any(st[0] == s.seen.node for x in probe.samples(s.began) if x.sent < killed for st in x.states.values()):
                s.seen.walked = "an attach to its node had begun before the restart"
        elif name == "allocated-attached":  # in flight at the kill, complete before the start
            node, device = s.seen.node, s.seen.device
            done = [x.sent for x in probe.samples(killed) if x.states.get(device) == (node, "attached")]
            if not done or done[0] > (came if process else back):
                s.seen.walked = f"the attach of {device} did not complete while {s.seen.role} was down"
        elif not s.cell.grid:
            s.seen.walked = path_walked(ctx, s, killed, came)
        elif name == "allocated-free":
            allocated = [a.at for a in s.history.allocations()]
            if not allocated or allocated[0] > came:
                s.seen.walked = f"its claim was not allocated before {s.seen.role} started again"


def _conditions_at(history: History, at: float) -> dict[str, str]:
    """The binding conditions of the namespace's allocated claim as the record had them at `at`."""
    claims = [e.obj for e in history.events("claim") if e.at <= at and not e.deleted]
    claim = next((c for c in reversed(claims) if allocation_results(c)), None)
    if claim is None:
        return {}
    return {t: s for r in allocation_results(claim) for t, s in device_conditions(claim, r).items()}
