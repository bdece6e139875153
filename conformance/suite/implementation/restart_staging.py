"""IMP-8's restart matrix, staged: a role's cells planned in batches, and each cell of a batch put in its state up to
the role's kill (the restart itself and what follows: restart_batch.py).

How a cell is staged: each has its own pod, device(s), namespace and faults, on its own node where faults select by
node (count-based pools). Side by side for one restart: first the cells that need a bound pod (in parallel), then the
attaches held in flight (a `hang` fault, let go once the role is back). Where fewer devices or nodes are free than
cells, or the profile's fabricConcurrency allows fewer operations at once, the cells go in batches of what fits, one
restart each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conformance.cluster.manifests import claim_template, pinned_pod, requests_claim_template
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import Role
from conformance.observe.devices import Lease
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.cause import in_one_line
from conformance.suite.implementation.context import Context
from conformance.suite.implementation.outcome import bind_timeout, follow, outcome
from conformance.suite.implementation.restart_cells import CELLS, Cell, Restart, batches, not_staged
from conformance.suite.implementation.settle import attaching, delete_pod

BOUND_FIRST = (
    "released-detaching",
    "released-attached",
    "ready-attached",
    *(c.name for c in CELLS if c.move or c.path == "detach"),
)
ATTACHES = ("allocated-attaching", "allocated-attached", "released-attaching", "multi-one-attaching")


@dataclass
class Staged:
    """One cell of a restart: its own lease, namespace(s), record view(s) and faults."""

    seen: Restart
    lease: Lease
    ns: str  # where the judged pod lives (a move: B's)
    history: History
    faults: FaultInjector
    target: dict[str, Any]  # what its faults select: its node (count-based) or its device
    template: str = "gpu"
    count: int = 1  # devices of its claim
    ns_a: str = ""  # a move: A's namespace
    history_a: History | None = None
    fault: str = ""  # the fault holding (or marking) its operation
    began: float = 0.0  # time.time(): the suite began holding its pod back (a held attach seen, or its pod created)
    ended: float = 0.0  # time.time(): the suite stopped holding it back
    released: float = 0.0  # time.monotonic(): its pod and claim deleted
    held_from: float = 0.0  # time.monotonic(): a held detach seen
    let_on: float = 0.0  # time.monotonic(): its held operation let go
    bound_a: float = 0.0  # a move: when the pod on A was seen bound (the move is judged from there)
    kill_seen: tuple[str, str] | None = None  # a process role: (claim, fabric) read right after the kill
    guard: Any = None  # failed-hidden: the report guard (cluster/reportguard.py) holding its failure report
    fault_after: str = ""  # failed-seen: the fault failing every later attach of the failed device

    @property
    def cell(self) -> Cell:
        return self.seen.spec

    @property
    def pod_node(self) -> str:
        return self.seen.node_b or self.seen.node


def held_since(s: Staged) -> float:
    """time.monotonic() of the moment the cell's held operation began to be held: the fault injector's own time of its
    first hit (the fabric refused or hung it then), where it says one; else now (the suite just saw it held)."""
    now = time.monotonic()
    try:
        hits = s.faults.hits(s.fault) if s.fault else []
    except Exception:  # the injector's word is a refinement: the suite's own sighting stands without it
        hits = []
    stamps = [parsed for hit in hits if (parsed := _wall(hit.get("at"))) is not None]
    return min(now, min(stamps) - (time.time() - now)) if stamps else now


def _wall(text: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp (or a number), None if it is neither."""
    if isinstance(text, int | float):
        return float(text)
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def _multi_size(ctx: Context) -> int:
    """A multi-device cell's claim size: the profile's devicesPerClaim, bounded by what reaches one fabric-only node
    (0: not even two)."""
    for n in range(ctx.profile.devices_per_claim, 1, -1):
        if ctx.fabric_only_nodes(n):
            return n
    return 0


def plan(ctx: Context, role: Role, only: list[str] | None = None) -> tuple[list[list[Cell]], list[Restart], int]:
    """The role's cells (`only`: just these, staged again) in batches, the cells it cannot stage (with why), the
    multi-device claim's size."""
    nodes = ctx.remote_nodes()  # owed: waited for up to the promise, else the scenario fails with the cause
    n = _multi_size(ctx)
    room = min(len(nodes), ctx.pool.count("fabric")) if ctx.counted else ctx.pool.count("fabric", nodes[0])
    cells, skipped = [], []
    failures = bool(ctx.profile.capabilities.get("attachFailureReporting")) and ctx.profile.promises.reports_failures
    for cell in CELLS if only is None else [c for c in CELLS if c.name in only]:
        why = not_staged(
            cell,
            command=role.process is None,
            counted=ctx.counted,
            multi=bool(ctx.profile.capabilities.get("multiDeviceClaims")) and n >= 2,
            concurrency=ctx.profile.fabric_concurrency,
            second_node=ctx.counted or len({x for d in ctx.pool.devices.values() for x in d.nodes}) >= 2,
            failures=failures,
        )
        if cell.multi and not why and not ctx.counted and n > room:
            why = f"{n} devices do not reach one node"
        if why:
            skipped.append(Restart(cell.name, role.name, "", skipped=why))
        else:
            cells.append(cell)
    devices = {c.name: n for c in cells if c.multi and not ctx.counted}
    devices |= {c.name: c.devices for c in cells if c.devices > 1 and not ctx.counted}
    return batches(cells, max(1, room), ctx.profile.fabric_concurrency, devices), skipped, n


def stage(ctx: Context, stack: ExitStack, cell: Cell, role: Role, n: int) -> Staged:
    injector = ctx.profile.fault_injector
    assert injector is not None  # faults=True
    url = ctx.implementation.resolve(injector.url)
    timeout = float(ctx.cluster.info.binding_timeout_s)
    if cell.multi or cell.move:
        nodes = ctx.remote_nodes(n if cell.multi else 1)
        count = n if cell.multi else 1
        where = nodes if ctx.counted else nodes[0]
        lease = ctx.lease(count, "fabric", where, exclusive=ctx.counted, part=cell.name)
        node = lease.node or nodes[0]
        klass = ctx.device_class(lease)
        ns = ctx.namespace(f"{ctx.scenario.name}-{cell.name}")
        template = "gpus" if cell.multi else "gpu"
        manifest = requests_claim_template("gpus", [("gpu", klass, n)]) if cell.multi else claim_template("gpu", klass)
        ctx.objects.create(manifest, ns)
    else:  # a failure cell: one of two devices for its claim (the other to be reallocated to)
        node, lease, ns = ctx.remote_fabric(cell.devices, exclusive=ctx.counted, part=cell.name)
        count, template = 1, "gpu"
    faults = FaultInjector(url, frozenset(lease.identities), frozenset({node}) if ctx.counted else frozenset())
    stack.enter_context(faults)
    history = stack.enter_context(ctx.history(ns))
    seen = Restart(cell.name, role.name, node, binding_timeout_s=timeout)
    target: dict[str, Any] = {"node": node} if ctx.counted else {"device": lease.identities[0]}
    s = Staged(seen, lease, ns, history, faults, target, template, count)
    if not ctx.counted and not cell.multi and not cell.failure:
        seen.device = lease.identities[0]  # the held cells name the device their fault hit, once it is hit
    if cell.move:  # the pod on A lives in a namespace of its own; the judged one (B's) in `ns`
        reach = lease.devices[0].nodes - {node}
        remote = [x for x in ctx.fabric_only_nodes(1) if x in reach]
        others = remote or sorted(x.name for x in ctx.nodes() if x.name in reach)
        if not others:
            seen.skipped = f"the fabric device {lease.identities[0]} reaches no node but {node}: it cannot move"
            return s
        seen.node_b = others[0]
        s.ns_a = ctx.namespace(f"{ctx.scenario.name}-{cell.name}-a")
        ctx.objects.create(claim_template("gpu", klass), s.ns_a)
        s.history_a = stack.enter_context(ctx.history(s.ns_a))
    return s


def wait_probe(
    ctx: Context, device: str, done: Callable[[tuple[str, str] | None], bool], timeout: float, what: str
) -> tuple[str, str] | None:
    probe = ctx.probe
    assert probe is not None
    return wait_for(
        lambda: probe.now().get(device),
        done,
        timeout=timeout,
        expected=what,
        interval=PROBE_PERIOD_S,
        max_interval=PROBE_PERIOD_S,
    )


def bound_first(ctx: Context, s: Staged) -> None:
    """The cells that begin with a bound pod (on A for a move), up to their kill point."""
    node, cell = s.seen.node, s.seen.cell
    ns, history = (s.ns_a, s.history_a) if s.history_a is not None else (s.ns, s.history)
    ctx.objects.create(pinned_pod("app", "gpu", node), ns)
    began = time.time()
    try:
        first = follow(ctx, history, node, bind_timeout(ctx.profile))
    except WaitTimeout as exc:
        why = in_one_line(ctx, str(exc), began, {ns})
        s.seen.walked = f"the pod on {node} did not bind before the restart: {why}"
        s.seen.outcome = outcome(ctx, history, node)
        return
    s.seen.device = next((i for i in first.final_identities() if i), "") or s.lease.identities[0]
    if not s.cell.move:
        s.seen.outcome = first
    device, detach = s.seen.device, {"node": node} if ctx.counted else {"device": s.seen.device}
    assert first.binding is not None
    s.bound_a = first.binding.at
    if cell in ("released-detaching", "released-detached"):  # detach sent, held (and let complete while down)
        s.fault = s.faults.arm("hang", operation="detach", **detach)
        delete_pod(ctx, s.ns, s.history)
        s.released = time.monotonic()
        state = wait_probe(
            ctx,
            device,
            lambda st: st is None or st[1] == "detaching",
            ctx.profile.promises.detach_s,
            f"the detach of {device} from {node} to start (the probe to say detaching)",
        )
        s.held_from = held_since(s)
        if state is None:
            s.seen.walked = f"{device} was detached before the restart could come"
    elif cell == "move-detaching-a":
        s.fault = s.faults.arm("hang", device, operation="detach")
        delete_pod(ctx, ns, history)
        ctx.objects.create(pinned_pod("app", "gpu", s.seen.node_b), s.ns)
        s.began = time.time()
        wait_probe(
            ctx,
            device,
            lambda st: st is None or st[1] == "detaching",
            bind_timeout(ctx.profile, ctx.profile.promises.detach_s),
            f"the detach of {device} from {node} to start once it was released and asked for on {s.seen.node_b}",
        )
        s.held_from = held_since(s)
    # move-attaching-b's move to B is staged later (move_to_b), right before the kill: see there.


def move_to_b(ctx: Context, s: Staged, held: int = 0) -> None:
    """move-attaching-b, after its pod bound on A: the pod on A deleted, one on B made, the attach to B held. Its
    state at the kill (allocated, attaching to B) lasts only the cluster's bindingTimeout from the allocation, so it is
    staged once every cell that begins bound has bound, not beside them (staged beside them, the batch on a loaded
    machine reached the kill more than the 20 s bindingTimeout after its allocation and the scheduler had cleared it:
    'not walked', 1.38.0-beta.0, 2026-12-07)."""
    ns, history = (s.ns_a, s.history_a) if s.history_a is not None else (s.ns, s.history)
    s.fault = s.faults.arm("hang", s.seen.device)
    delete_pod(ctx, ns, history)
    ctx.objects.create(pinned_pod("app", "gpu", s.seen.node_b), s.ns)
    timeout = bind_timeout(ctx.profile, ctx.profile.promises.detach_s)
    s.seen.device = attaching(ctx, s.faults, s.fault, s.seen.node_b, timeout, held)
    s.began = time.time()


def hold_attaches(ctx: Context, staged: list[Staged], others: int) -> None:
    """The cells whose attach is held in flight up to the restart (allocated-attached: let go while the role is
    down, a process role's only)."""
    for s in staged:
        s.fault = s.faults.arm("hang", **s.target)
        ctx.objects.create(pinned_pod("app", s.template, s.seen.node), s.ns)
    for s in staged:
        timeout = bind_timeout(ctx.profile)
        s.seen.device = attaching(ctx, s.faults, s.fault, s.seen.node, timeout, others + len(staged) - 1)
        s.began = time.time()
        if s.cell.multi:  # the others attached while this one is held
            ids = set(s.lease.identities)
            node, want = s.seen.node, s.count - 1
            _wait_attached(ctx, node, ids, s.seen.device, want, bind_timeout(ctx.profile, s.count * 2.0))
        if s.seen.cell == "released-attaching":
            delete_pod(ctx, s.ns, s.history)
            s.released = time.monotonic()
            s.history.wait(lambda h: not h.latest("claim"), timeout=SCHEDULE_S, expected="its claim gone (released)")


def _wait_attached(ctx: Context, node: str, ids: set[str], held: str, want: int, timeout: float) -> None:
    probe = ctx.probe
    assert probe is not None
    wait_for(
        lambda: [i for i, st in probe.now().items() if st == (node, "attached") and (ctx.counted or i in ids)],
        lambda found: len([i for i in found if i != held]) >= want,
        timeout=timeout,
        expected=f"{want} devices of the claim attached to {node} while the attach of {held} is held",
        interval=PROBE_PERIOD_S,
        max_interval=PROBE_PERIOD_S,
    )
