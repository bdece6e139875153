"""Reuse on purpose (IMP-28): a small pool under churn. Three devices (leased on purpose: the device whose attach failed
last, the one that moved last, the one released last, where free; count-based: capacity on a node of the scenario's
own) serve ten claims one after the other, two at a time, each claim its own pod pinned to the node:

- the first claim's attach (readying) is made to fail (a `fail` fault on every leased device, or on the node's
  attaches, disarmed once the failure shows): the failed device is quarantined by the stack and, if the stack offers
  it again while the churn lasts, a later claim uses it (after a failure);
- every device is released and taken again by a later claim (released; readied once on a node-local gate);
- after eight claims the churn rests until the stack let every device go (detached; a node-local gate: unprepared),
  then the last two claims take them again (released and let go; readied once and since unprepared), pinned to a
  second node every leased device reaches, where there is one (after a move), with one more device leased on purpose
  then (other scenarios have failed, moved and released theirs by that time; not for count-based pools);
- every third claim is deleted two seconds before its pod: the device must stay attached while the pod runs (IMP-10's
  order clause, judged run-wide by test_order.py).

Each second use is judged (conformance/observe/reuse.py): no stale failure, no condition True before the device is
attached (readied) on THAT node, every claim served. Node-local gates also judge each claim's conditions against the
readiness probe (RDY-3). The run-wide order clauses (test_order.py) judge this scenario's steps as every other's.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import pod_with_claim, resource_claim
from conformance.cluster.waits import CANCELLED, WaitTimeout, check_cancelled, wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import LoadedProfile
from conformance.observe import reuse
from conformance.observe.devices import FAILED, MOVED, RELEASED, Lease
from conformance.observe.order import attach_problem
from conformance.observe.readiness import ReadinessSampler
from conformance.observe.steps import READY, Step, steps
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.implementation.outcome import bind_timeout
from conformance.suite.implementation.readiness import gated_node, sampler
from conformance.suite.record import reads_capability
from conformance.suite.scenario import Context, result_fixture, scenario, skip_for_profile

DEVICES, CLAIMS, LANES, MOVES = 3, 10, 2, 2
CLAIM_FIRST_S = 2.0  # every third claim is deleted this long before its pod
REASON = "ConformanceInjectedFailure"
FAILURES = reads_capability("attachFailureReporting")
PREFER = (FAILED, MOVED, RELEASED)  # leased on purpose: a device that went through these, the latest, where free


@dataclass
class Churn:
    model: str
    nodes: list[str]  # the node the claims are pinned to, and the second node of the moves (if any)
    namespace: str
    leased: dict[str, str]  # identity -> what it went through when leased on purpose ("" for the others)
    device_class: str = ""
    failure: str = ""  # how the first claim's failure went (or why none was caused)
    armed_until: float = 0.0  # when the scenario's faults were disarmed
    armed_revision: int = 0  # the cluster's revision once they were (0: not read)
    served: dict[str, str] = field(default_factory=dict)  # claim -> node its pod bound on
    unserved: dict[str, str] = field(default_factory=dict)  # claim -> why its pod did not bind in time
    reuses: list[reuse.Reuse] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what a reuse carried over (reuse.judge)
    unready: list[str] = field(default_factory=list)  # node-local: a claim's condition True before the device was ready
    judged_ready: int = 0
    readiness: bool = False  # a readiness probe judged the node-local gate
    rested: str = ""  # how the rest before the last claims went

    def paths(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.reuses:
            out[r.path] = out.get(r.path, 0) + 1
        return out


@dataclass
class _Claim:
    name: str
    node: str
    claim_first: bool
    started: float = 0.0
    deadline: float = 0.0
    release_pod_at: float | None = None


def _place(ctx: Context) -> tuple[list[str], Any]:
    """The node(s) and the lease: three gated devices on one node (node-local), capacity on a node of the scenario's
    own (count-based), else three fabric devices reaching a node without node-local devices, and a second node all
    three reach, where there is one (the moves)."""
    prefer = PREFER
    if not ctx.profile.has_fabric:
        node, lease = gated_node(ctx, DEVICES, prefer=prefer)
        return [node], lease
    nodes = ctx.remote_nodes(DEVICES)
    if ctx.counted:
        lease = ctx.lease(DEVICES, "fabric", nodes, exclusive=True)
        return [lease.node or nodes[0]], lease
    lease = ctx.lease(DEVICES, "fabric", nodes[0], prefer=prefer)
    reach = [n for n in nodes[1:] if all(n in d.nodes for d in lease.devices)]
    return [nodes[0], *reach[:1]], lease


def _delete(ctx: Context, kind: str, name: str, ns: str) -> None:
    try:
        if kind == "pod":
            ctx.cluster.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        else:
            ctx.cluster.resource.delete_namespaced_resource_claim(name, ns)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _fail_first(ctx: Context, churn: Churn, history: History, faults: FaultInjector | None, first: _Claim) -> None:
    """The first claim alone, its attach failing: wait until its failure shows, then disarm every fault."""
    if faults is None or not ctx.profile.capabilities.get(FAILURES):
        churn.failure = "not caused: " + ("no faultInjector" if faults is None else f"the profile lacks {FAILURES}")
        return
    message = f"conformance scenario {ctx.scenario.name}: attach refused"
    leased = sorted(churn.leased)
    for ident in leased or [None]:
        faults.arm("fail", ident, node=None if ident else churn.nodes[0], reason=REASON, message=message)
    _start(ctx, churn, first)

    def failed(h: History) -> str | None:
        for a in h.allocations(first.name):
            for f in a.failures:
                if ctx.profile.failure_conditions.get(f["type"], "failure") == "failure":
                    return f"{f['type']} on {f['device']} at revision {f['revision']}"
        return None

    try:
        churn.failure = history.wait(failed, timeout=SCHEDULE_S + ctx.profile.promises.attach_s, expected="a failure")
    except WaitTimeout as exc:
        churn.failure = f"none shown: {str(exc).splitlines()[0]}"
    finally:
        faults.close()
        churn.armed_until = time.time()
        # A quorum list's resourceVersion is etcd's revision now: an allocation written after it was made with no
        # fault armed, whichever stream delivers it when (reuse.judge).
        listed = ctx.cluster.resource.list_namespaced_resource_claim(churn.namespace, limit=1)
        churn.armed_revision = int(listed.metadata.resource_version or 0)


def _start(ctx: Context, churn: Churn, c: _Claim) -> None:
    c.started = time.time()
    moving = c.node != churn.nodes[0]
    c.deadline = c.started + bind_timeout(ctx.profile, ctx.profile.promises.detach_s if moving else 0.0)
    ctx.objects.create(resource_claim(c.name, churn.device_class), churn.namespace)
    ctx.objects.create(pod_with_claim(f"pod-{c.name}", c.name, c.node), churn.namespace)


def _churn(ctx: Context, churn: Churn, history: History, todo: list[_Claim], running: list[_Claim]) -> None:
    """Keep LANES claims in flight until every one was served (or ran out of time), releasing each once bound."""
    while todo or running:
        while todo and len(running) < LANES:
            c = todo.pop(0)
            _start(ctx, churn, c)
            running.append(c)
        bound = history.bindings()
        now = time.time()
        for c in list(running):
            pod = f"pod-{c.name}"
            if c.release_pod_at is not None:
                if now >= c.release_pod_at:
                    _delete(ctx, "pod", pod, churn.namespace)
                    running.remove(c)
                continue
            if pod in bound:
                churn.served[c.name] = bound[pod].node
            elif now > c.deadline:
                held = [a.devices for a in history.allocations(c.name)]
                churn.unserved[c.name] = f"pod {pod} pinned to {c.node} not bound in {now - c.started:.0f}s ({held})"
            else:
                continue
            _delete(ctx, "claim", c.name, churn.namespace)
            if c.claim_first and pod in bound:
                c.release_pod_at = now + CLAIM_FIRST_S  # the pod runs on: its device must stay attached
            else:
                _delete(ctx, "pod", pod, churn.namespace)
                running.remove(c)
        if CANCELLED.wait(0.2):  # an interrupted run stops here, not when the last claim's deadline passes
            check_cancelled()


def _rest(ctx: Context, churn: Churn, probe: ReadinessSampler | None, leased: list[str]) -> None:
    """Wait (up to detachSeconds) until the stack let every leased device go: the fabric probe lists none of them
    (count-based: nothing on the scenario's node), or the readiness probe says none is ready. Not a verdict (IMP-5 and
    IMP-12 judge the detach): the last claims then reuse devices that were let go."""
    node, fabric = churn.nodes[0], ctx.probe
    if probe is not None:
        readiness = probe

        def let_go() -> bool:
            return not any((s := readiness.latest(i)) is not None and s.ready for i in leased)
    elif fabric is not None:

        def let_go() -> bool:
            now = fabric.now()
            return not any(i in now for i in leased) if leased else not any(n == node for n, _ in now.values())
    else:
        churn.rested = "no rest: no probe says when the devices are let go"
        return
    began = time.monotonic()
    try:
        wait_for(let_go, bool, timeout=ctx.profile.promises.detach_s + 5, expected="every leased device let go")
        churn.rested = f"every device let go {time.monotonic() - began:.1f}s after the first eight claims"
    except WaitTimeout:
        churn.rested = f"not every device let go within {ctx.profile.promises.detach_s + 5:g}s (IMP-5, IMP-12 judge it)"


def _lease_on_purpose(ctx: Context, churn: Churn, lease: Lease, probe: ReadinessSampler | None) -> None:
    """One more device for the last claims, leased on purpose now that the scenarios beside had time to fail, move and
    release theirs (PREFER); none went through anything: nothing added (the last claims reuse the churn's own). The
    readiness probe samples it too: its readiness is judged like the others'."""
    extra = ctx.lease(1, "fabric", churn.nodes[-1], prefer=PREFER)
    if not extra.past:
        ctx.pool.release(extra)
        ctx.leases.remove(extra)
        return
    churn.leased |= extra.past
    if probe is not None:
        probe.add(frozenset(extra.identities))
    churn.device_class = ctx.device_class(lease, extra)


@scenario(
    "small-pool-churn",
    "three devices serve ten claims in turn, two at a time: the first claim's attach fails, devices are released and "
    "taken again, let go, moved to a second node, and claims deleted before their pods; every second use judged",
    ("IMP-28", "RDY-3"),
    readiness_for=("RDY-3",),
)
def small_pool_churn(ctx: Context) -> Churn:
    nodes, lease = _place(ctx)
    ns = ctx.namespace()
    churn = Churn(ctx.profile.binding_model, nodes, ns, {i: lease.past.get(i, "") for i in lease.identities})
    churn.device_class = ctx.device_class(lease)
    claims = [_Claim(f"c{k}", nodes[-1] if k >= CLAIMS - MOVES else nodes[0], k % 3 == 1) for k in range(CLAIMS)]
    injector = ctx.profile.fault_injector
    url = ctx.implementation.resolve(injector.url) if injector else None
    scope = (frozenset(lease.identities), frozenset(nodes[:1]) if ctx.counted else frozenset())
    faults = FaultInjector(url, *scope) if url else None
    watch = sampler(ctx, lease) if not ctx.profile.has_fabric else nullcontext(None)
    with watch as probe, ctx.history(ns) as history:
        try:
            _fail_first(ctx, churn, history, faults, claims[0])
            running = [claims[0]] if claims[0].started else []
            _churn(ctx, churn, history, [c for c in claims[: CLAIMS - MOVES] if not c.started], running)
            _rest(ctx, churn, probe, lease.identities)
            if not ctx.counted:
                _lease_on_purpose(ctx, churn, lease, probe)
            _churn(ctx, churn, history, claims[CLAIMS - MOVES :], [])
        finally:
            if faults is not None:
                faults.close()
        _judge(ctx, churn, probe)
    ctx.measure("churn_claims_served", len(churn.served))
    leased = {i: p for i, p in churn.leased.items() if p}
    ctx.say(
        f"{ctx.scenario.name}: {len(churn.served)} of {CLAIMS} claims served on {churn.nodes}; reuses {churn.paths()}; "
        f"leased on purpose {leased or 'none'}; first failure: {churn.failure}; {churn.rested}"
    )
    return churn


def _judge(ctx: Context, churn: Churn, probe: ReadinessSampler | None) -> None:
    prof = ctx.profile
    records = ctx.record.select()
    identities = ctx.record.identities()
    meanings = dict(prof.failure_conditions)
    reading = {"driver": prof.driver, "attribute": prof.identity_attribute, "identities": identities}
    found = steps(records, **reading, meanings=meanings)
    churn.reuses = reuse.reuses(found, {churn.namespace}, records, **reading, meanings=meanings)
    samples = ctx.record.samples() if ctx.probe is not None else []

    def ready(s: Step) -> str | None:
        if s.identity is None or s.node is None:
            return None
        if probe is not None:
            what = f"{s}: {list(s.conditions)} True at revision {s.revision}"
            return probe.ready_problem(s.identity, s.node, s.at, what)
        return attach_problem(s, samples) if samples else None

    judged = ready if (probe is not None or samples) else None
    churn.problems = reuse.judge(churn.reuses, found, churn.armed_until, judged, churn.armed_revision)
    if probe is not None:
        churn.readiness = True
        for s in found:
            if s.what == READY and s.claim.startswith(f"{churn.namespace}/"):
                churn.judged_ready += 1
                if problem := ready(s):
                    churn.unready.append(problem)


churn = result_fixture("churn", "small-pool-churn")


@pytest.mark.requirement("IMP-28")
def test_every_second_use_of_a_device_is_served_afresh(churn: Churn, record_property: Any) -> None:
    record_property("reuse_paths", churn.paths())
    record_property("leased_on_purpose", {i: p for i, p in churn.leased.items() if p})
    record_property("first_failure", churn.failure)
    record_property("rest", churn.rested)
    if churn.problems:
        pytest.fail(churn.problems[0] + "".join(f"\n  {p}" for p in churn.problems[1:]), pytrace=False)
    for name, why in churn.unserved.items():
        reused = [str(r) for r in churn.reuses if r.use.held.claim == f"{churn.namespace}/{name}"]
        pytest.fail(
            f"claim {churn.namespace}/{name} of the churn never served (a failure not cleared?): {why}; its devices' "
            f"reuses: {reused or 'none seen'}" + "".join(f"\n  {n}: {w}" for n, w in churn.unserved.items()),
            pytrace=False,
        )
    assert churn.reuses, f"no device of the churn was used twice ({len(churn.served)} claims served): nothing judged"


@pytest.mark.requirement("RDY-3")
def test_every_claim_of_the_churn_is_reported_ready_only_once_its_device_is(
    churn: Churn, profile: LoadedProfile
) -> None:
    skip_for_profile("small-pool-churn", "RDY-3", profile.profile)
    if not churn.readiness:
        pytest.skip(f"bindingModel {churn.model}: the readiness probe judges a node-local gate only")
    if churn.unready:
        pytest.fail(churn.unready[0] + "".join(f"\n  {u}" for u in churn.unready[1:]), pytrace=False)
    assert churn.judged_ready, "no binding condition of the churn's claims was seen True"
