"""IMP-18: claims of many devices and several requests, every device judged on its own.

- multi-device: one pod, pinned to a node without node-local devices, with one claim of two requests (two device
  classes over two leased sets; count-based pools: one class of the model, capacity on a node the scenario has to
  itself) for `devicesPerClaim` devices in all (default 4, bounded by what the fabric has reaching the node). The
  attach of ONE of them is slowed. The pod must bind on the node with every allocated device attached there (the
  probe's first answer after the binding, per device); each device's conditions (status.devices, keyed by driver,
  pool and device) turn True only once THAT device is attached to the allocation's node — the slowed one later than
  the rest; the allocation answers each request with its own count. Then pod and claim go: every device is let go
  (detached and offered again) within detachSeconds.
- multi-device-failure: one claim of N devices out of N+1 leased (count-based: N+1 entries of capacity on the node);
  the N attaches are held (a `hang` fault each) and then ONE of them fails while the others complete. The failed
  device's entry must carry a failure condition with reason and message, the claim is rescheduled, the pod binds with
  N devices all attached, the failed device never allocated again, and every device of the failed allocation the pod
  did not end with is let go (detached and offered again) within detachSeconds of the deallocation.

Per binding model: keep-in-pool judges the fabric devices; reschedule-to-local the node-local copies the claim moved
to (per device: a claim may end with some copies and some fabric devices, each judged as what it is); count-based
entries name no device, so the devices are the ones the faults hit and the node-local copies (or status data) name.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import pinned_pod, requests_claim_template
from conformance.cluster.waits import wait_for
from conformance.implementation.faults import FaultInjector
from conformance.observe.devices import Lease
from conformance.observe.views import SCHEDULE_S, Allocation, History
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.implementation.settle import LetGo, attached_at, delete_pod, let_go
from conformance.suite.implementation.shape import claim_size, shaped_claim
from conformance.suite.scenario import Context, result_fixture, scenario

SLOW_S = 4.0  # the one slowed attach: well behind the others (each about a second in the reference fabric)
REASON = "ConformanceInjectedFailure"


def _faults(ctx: Context, leases: list[Lease], node: str) -> FaultInjector:
    assert ctx.profile.fault_injector is not None  # faults=True: skipped without one
    identities = frozenset(i for lease in leases for i in lease.identities)
    return FaultInjector(
        ctx.implementation.resolve(ctx.profile.fault_injector.url),
        identities,
        frozenset({node}) if ctx.counted else frozenset(),
    )


@dataclass
class MultiRun:
    node: str
    requests: dict[str, int]  # request name -> devices asked
    outcome: Outcome | None = None
    slowed: str | None = None  # the physical device whose attach was slowed
    slowed_attached: float | None = None  # when the probe first said it attached to the node (time.time())
    others_attached: dict[str, float | None] = field(default_factory=dict)  # the other devices of the final allocation
    let_go: LetGo | None = None


@scenario(
    "multi-device",
    "one pod's claim of several devices over two requests, one attach slowed: each device judged on its own",
    ("IMP-18",),
    capabilities=("multiDeviceClaims",),
    probe=True,
    faults=True,
)
def multi_device(ctx: Context) -> MultiRun:
    claimed = shaped_claim(ctx, "multi", exclusive=ctx.counted)
    node, leases, ns, n = claimed.node, claimed.leases, claimed.ns, claimed.count
    run = MultiRun(node, dict(claimed.requests))
    probe = ctx.probe
    assert probe is not None  # probe=True
    with ctx.history(ns) as history, _faults(ctx, leases, node) as faults:
        target = {"node": node} if ctx.counted else {"device": leases[1].identities[0]}
        slow = faults.arm("slow", **target, count=1, delaySeconds=SLOW_S)
        created = time.time()
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        # The attaches may run one after another (fabricConcurrency): N of them, one slowed.
        extra = SLOW_S + (n - 1) * ctx.profile.promises.attach_s
        run.outcome = seen = follow(ctx, history, node, timeout=bind_timeout(ctx.profile, extra))
        hits = faults.hits(slow)
        run.slowed = str(hits[0]["device"]) if hits else None
    if run.slowed:
        run.slowed_attached = attached_at(probe, run.slowed, node, created)
    for ident in seen.final_identities():
        if ident and ident != run.slowed:
            run.others_attached[ident] = attached_at(probe, ident, node, created)
    if seen.binding and seen.allocations:
        ctx.measure("multi_device_attach_to_bind_seconds", round(seen.binding.at - seen.allocations[0].at, 3))
    used = [i for i in seen.final_identities() if i]
    released = time.monotonic()
    delete_pod(ctx, ns, history)
    run.let_go = let_go(ctx, used, leases[0], released, ctx.profile.promises.detach_s)
    return run


@dataclass
class FailureRun:
    node: str
    count: int
    failed: str | None = None  # the physical device whose attach failed
    failed_copy: tuple[str, str] | None = None  # its (pool, device) in the allocation that failed
    failing: Allocation | None = None  # the allocation the failure was reported on
    outcome: Outcome | None = None
    let_go: LetGo | None = None
    released: list[str] = field(default_factory=list)  # devices of the failed allocation the pod did not end with


@scenario(
    "multi-device-failure",
    "one device's attach of a several-device claim fails: that device reported, the claim rescheduled, others let go",
    ("IMP-18",),
    capabilities=("multiDeviceClaims", "attachFailureReporting"),
    probe=True,
    faults=True,
)
def multi_device_failure(ctx: Context) -> FailureRun:
    n, nodes = claim_size(ctx, spare=1)
    lease = ctx.lease(n + 1, "fabric", nodes if ctx.counted else nodes[0], exclusive=ctx.counted)
    node = lease.node or nodes[0]
    run = FailureRun(node, n)
    ns = ctx.namespace()
    ctx.objects.create(requests_claim_template("gpus", [("gpu", ctx.device_class(lease), n)]), ns)
    with ctx.history(ns) as history, _faults(ctx, [lease], node) as faults:
        # Every attach of the first allocation is held, so that exactly one of them can be made to fail: the suite
        # cannot know which N of the N+1 devices the scheduler picks (count-based: which devices the stack attaches).
        if ctx.counted:
            held = [faults.arm("hang", node=node, count=1) for _ in range(n)]
        else:
            held = [faults.arm("hang", ident, count=1) for ident in lease.identities]
        ctx.objects.create(pinned_pod("app", "gpus", node), ns)
        # A stack that runs fewer fabric operations at once (fabricConcurrency) begins only that many attaches.
        hung = _wait_hung(ctx, faults, min(n, ctx.profile.fabric_concurrency or n), history)
        for fault_id in held:  # faults not hit go (the spare's before a reallocation can attach it)
            if not faults.hits(fault_id):
                faults.disarm(fault_id)
        victim_fault, run.failed = sorted((str(op["fault"]), str(op["device"])) for op in hung)[0]
        for fault_id in {str(op["fault"]) for op in hung} - {victim_fault}:
            faults.release_fault(fault_id)
        message = f"conformance scenario {ctx.scenario.name}: one device of {n} refused"
        faults.release_fault(victim_fault, "fail", reason=REASON, message=message)
        run.failing = history.wait(
            lambda h: next((a for a in h.allocations() if _failure_true(ctx, a)), None),
            timeout=SCHEDULE_S + ctx.profile.promises.attach_s,
            expected="a failure condition (meaning failure) True on the claim after one device's attach failed",
        )
        failing = run.failing
        history.wait(
            lambda h: next((a.cleared_revision for a in h.allocations() if a.revision == failing.revision), None),
            timeout=SCHEDULE_S,
            expected="the claim deallocated after the failure",
        )
        cleared = next(a.cleared_at for a in history.allocations() if a.revision == failing.revision) or time.time()
        since = time.monotonic() - max(0.0, time.time() - cleared)
        run.outcome = seen = follow(
            ctx, history, node, timeout=bind_timeout(ctx.profile, n * ctx.profile.promises.attach_s)
        )
    run.failed_copy = next((d for d in failing.devices if seen.identity_in(failing, d) == run.failed), None)
    # The devices of the failed allocation: the held attaches name them (count entries name none).
    before = {str(op["device"]) for op in hung} | {seen.identity_in(failing, d) for d in failing.devices} - {None}
    kept = set(seen.final_identities())
    run.released = sorted(i for i in before if i and i not in kept and i != run.failed)
    if run.released:
        run.let_go = let_go(ctx, run.released, lease, since, ctx.profile.promises.detach_s)
    delete_pod(ctx, ns, history)
    return run


def _wait_hung(ctx: Context, faults: FaultInjector, n: int, history: History) -> list[dict[str, object]]:
    """`n` attaches of the claim's first allocation, once that many are held by the scenario's faults."""
    return wait_for(
        faults.hung,
        lambda ops: len({op["device"] for op in ops}) >= n,
        timeout=SCHEDULE_S + ctx.profile.promises.attach_s,
        expected=f"{n} attaches of the claim's devices begun at once (held by the scenario's hang faults; a stack that "
        "runs fewer fabric operations at once declares fabricConcurrency)",
        describe=lambda ops: f"held: {ops}; {history.describe()}",
        interval=0.2,
        max_interval=0.5,
    )


def _failure_true(ctx: Context, allocation: Allocation) -> bool:
    return any(ctx.profile.meaning(f["type"]) == "failure" for f in allocation.failures)


multi = result_fixture("multi", "multi-device")
failure = result_fixture("failure", "multi-device-failure")


@pytest.mark.requirement("IMP-18")
def test_each_device_of_a_multi_request_claim_is_attached_before_the_pod_binds(multi: MultiRun) -> None:
    seen = multi.outcome
    assert seen is not None and seen.final is not None, f"the pod was not bound:\n  {seen.describe() if seen else ''}"
    asked = sum(multi.requests.values())
    got = Counter(r.get("request") for r in seen.final.results)
    assert dict(got) == multi.requests, (
        f"the claim asked {multi.requests} (request -> devices); its allocation answered {dict(got)}\n"
        f"  {seen.describe()}"
    )
    assert len(set(seen.final.devices)) == asked, f"{asked} devices asked, allocated {seen.final.devices}"
    problems = seen.binding_problems()
    assert not problems, "\n".join(problems) + f"\n  {seen.describe()}"


@pytest.mark.requirement("IMP-18")
def test_each_device_conditions_follow_its_own_attach(multi: MultiRun) -> None:
    seen = multi.outcome
    assert seen is not None
    assert multi.slowed, "the slowed attach hit no device: the scenario's fault was never used"
    assert seen.judged >= 2, (
        f"fewer than two devices' conditions were seen True on a fabric allocation:\n  {seen.describe()}"
    )
    assert not seen.early, (
        f"conditions True before THAT device was attached to the allocation's node (the attach of {multi.slowed} "
        f"was slowed {SLOW_S:g}s; attached at {multi.slowed_attached}, the others at {multi.others_attached}):\n"
        + "\n".join(seen.early)
        + f"\n  {seen.describe()}"
    )
    assert not seen.unidentified, f"the fabric entries {seen.unidentified} could not be tied to a physical device"


@pytest.mark.requirement("IMP-18")
def test_every_device_of_the_claim_is_let_go_on_release(multi: MultiRun) -> None:
    got = multi.let_go
    assert got is not None and not got.problem(), got.problem() if got else "no release observed"


@pytest.mark.requirement("IMP-18")
def test_one_failed_device_reschedules_the_claim_and_the_pod_binds_without_it(failure: FailureRun) -> None:
    seen = failure.outcome
    assert seen is not None and failure.failing is not None
    assert failure.failed, "the failed attach named no device"
    if failure.failed_copy is not None:  # identified entries: the failure is reported on THAT device's entry
        types = [t for (p, d, t) in failure.failing.true_at if (p, d) == failure.failed_copy]
        failing = [t for t in types if seen.meanings.get(t, "failure") == "failure"]
        assert failing, (
            f"{failure.failed} ({failure.failed_copy}) failed to attach; its status.devices entry showed "
            f"{types} True, no failure condition:\n  {seen.describe()}"
        )
    reported = [f for f in failure.failing.failures if seen.meanings.get(f["type"], "failure") == "failure"]
    assert all(f.get("reason") and f.get("message") for f in reported), f"failure without reason/message: {reported}"
    problems = seen.binding_problems(failed=failure.failing.revision)
    assert not problems, "\n".join(problems) + f"\n  {seen.describe()}"
    assert seen.final is not None and len(seen.final.devices) == failure.count
    again = [
        a.devices
        for a in seen.allocations
        if a.revision > failure.failing.revision and failure.failed in {seen.identity_in(a, d) for d in a.devices}
    ]
    assert not again, f"the failed device {failure.failed} was allocated again: {again}\n  {seen.describe()}"


@pytest.mark.requirement("IMP-18")
def test_the_other_devices_of_the_failed_allocation_are_let_go(failure: FailureRun) -> None:
    if not failure.released:
        return  # every healthy device went on into the new allocation: nothing of the failed one was left over
    got = failure.let_go
    assert got is not None and not got.problem(), got.problem() if got else "no release observed"
