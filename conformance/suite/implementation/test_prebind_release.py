"""IMP-13 and IMP-14: claims that go away, or time out, while their attach is in flight.

- prebind-delete-slow / prebind-delete-hang: the pod is deleted (and its claim) while the claim waits in PreBind,
  its attach slowed or hung; the hung attach is let go (completing) only once the claim is gone from the API. After
  that, nothing of it may stay attached: the device is detached and offered again within detachSeconds of the
  attach's end, and no binding condition ever said the device was attached before the fabric did.
- late-attach-after-timeout: the attach hangs past the scheduler's bindingTimeout (the scheduler clears the
  allocation), then completes. The device must not stay attached without a live allocation, and the pod must still
  end bound where the fabric attached its device (by any allowed path: the timeout on the way is the scenario's).

The physical device is the one the fault hit (count-based entries: the fault selects the attaches to the scenario's
own node). Two claim shapes (shape.py): one device, and `devicesPerClaim` devices over two requests, where the fault
holds back ONE device's attach while the others complete: every device the fabric listed on the node for the claim
(the leased ones; count-based: any, on a node the scenario has to itself) must be let go, each judged on its own, and
each device's conditions are compared with THAT device's attach. The run-wide record judges IMP-10..12 over the same
moments as well (test_fabric_truth.py).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.implementation.faults import FaultInjector
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.implementation.settle import (
    LetGo,
    attaching,
    delete_pod,
    first_listed,
    let_go,
    listed_since,
    unattached_until,
    unbacked_conditions,
)
from conformance.suite.implementation.shape import Shape, shaped_claim, shaped_fixture, shaped_scenario
from conformance.suite.scenario import Context, skip_if_binding_timeout_fixed

SLOW_S = 6.0  # the slowed attach: still in flight well after the pod and its claim were deleted
# The claim waits in PreBind this long with its attach in flight before the pod is deleted: a stack that reports the
# attach before the fabric finished it has the time to show it.
WAITING_S = 1.5


@dataclass
class Walk:
    node: str
    mode: str
    device: str = ""  # the physical device whose attach the fault slowed or hung
    in_flight: tuple[str, str] | None = None  # the probe's state of it when the claim went away (or timed out)
    devices: list[str] = field(default_factory=list)  # every device the fabric listed on the node for the claim
    claim_gone_s: float | None = None  # from the deletion to the claim gone from the API
    unbacked: list[str] = field(default_factory=list)  # conditions True before the fabric said attached
    let_go: LetGo | None = None
    # late-attach: the devices attached after the late one for an allocation the scheduler then cleared (a reschedule,
    # a count entry moved to a node-local copy), each owed from that clearing, not from the late attach's release
    let_go_reallocated: LetGo | None = None
    outcome: Outcome | None = None  # late-attach: how the pod ended
    timed_out: bool = False  # late-attach: the scheduler's binding timeout cleared the allocation


def _arm(
    ctx: Context, node: str, identities: frozenset[str], mode: Literal["slow", "hang"]
) -> tuple[FaultInjector, str]:
    injector = ctx.profile.fault_injector
    assert injector is not None  # faults=True: skipped without one
    faults = FaultInjector(
        ctx.implementation.resolve(injector.url), identities, frozenset({node}) if ctx.counted else frozenset()
    )
    target = {"node": node} if ctx.counted else {"device": next(iter(identities))}
    extra = {"delaySeconds": SLOW_S} if mode == "slow" else {}
    return faults, faults.arm(mode, **target, **extra)


def _delete(ctx: Context, ns: str, history: History) -> float:
    """Delete the pod and its claims; wait until the claims are gone from the API. Returns how long that took."""
    began = time.monotonic()
    delete_pod(ctx, ns, history)
    history.wait(
        lambda h: not h.latest("claim") or None,
        timeout=SCHEDULE_S,
        expected="the pod's claims gone from the API (deleted, finalizers done)",
    )
    return round(time.monotonic() - began, 3)


def _prebind_delete(ctx: Context, mode: Literal["slow", "hang"], shape: Shape) -> Walk:
    probe = ctx.probe
    assert probe is not None  # probe=True
    claimed = shaped_claim(ctx, shape, exclusive=ctx.counted)
    node, ns = claimed.node, claimed.ns
    seen = Walk(node, mode)
    faults, fault = _arm(ctx, node, frozenset(claimed.identities), mode)
    began = time.time()
    with faults, ctx.history(ns) as history:
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        seen.device = attaching(ctx, faults, fault, node, bind_timeout(ctx.profile))
        seen.in_flight = probe.after(time.time() + WAITING_S, timeout=WAITING_S + 10).get(seen.device)
        seen.claim_gone_s = _delete(ctx, ns, history)
        ended = time.monotonic()
        seen.devices = _claim_devices(ctx, claimed.identities, node, began, seen.device)
        if mode == "hang":  # the attach completes only now, its claim gone
            faults.release_fault(fault)
        else:  # the slowed attach ends at most SLOW_S after it started
            ended += SLOW_S
        seen.let_go = let_go(ctx, seen.devices, claimed.lease, ended, ctx.profile.promises.detach_s)
        unattached = {d: unattached_until(probe, d, node, began) for d in seen.devices}
        seen.unbacked = unbacked_conditions(ctx, history, unattached)
    return seen


def _claim_devices(ctx: Context, leased: list[str], node: str, began: float, hit: str) -> list[str]:
    """Every device the fabric listed on the node for the claim since `began`, and the one the fault hit."""
    probe = ctx.probe
    assert probe is not None
    return sorted({hit, *listed_since(probe, node, began, None if ctx.counted else set(leased))})


for _mode in ("slow", "hang"):

    def _run(ctx: Context, shape: Shape, mode: Literal["slow", "hang"] = _mode) -> Walk:  # type: ignore[assignment]
        return _prebind_delete(ctx, mode, shape)

    shaped_scenario(
        f"prebind-delete-{_mode}",
        f"the pod is deleted while its claim waits in PreBind, its attach {'slowed' if _mode == 'slow' else 'hung'}",
        ("IMP-13",),
        probe=True,
        faults=True,
    )(_run)


@shaped_scenario(
    "late-attach-after-timeout",
    "the attach hangs past the binding timeout, then completes: no attachment without a live allocation, the pod binds",
    ("IMP-14",),
    probe=True,
    faults=True,
)
def late_attach(ctx: Context, shape: Shape) -> Walk:
    probe = ctx.probe
    assert probe is not None  # probe=True
    info = ctx.cluster.info
    skip_if_binding_timeout_fixed(info)
    claimed = shaped_claim(ctx, shape, exclusive=ctx.counted)
    node, ns = claimed.node, claimed.ns
    seen = Walk(node, "hang")
    timeout_s = float(info.binding_timeout_s)
    faults, fault = _arm(ctx, node, frozenset(claimed.identities), "hang")
    began = time.time()
    with faults, ctx.history(ns) as history:
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        seen.device = attaching(ctx, faults, fault, node, bind_timeout(ctx.profile))
        history.wait(
            lambda h: any(a.cleared_revision is not None for a in h.allocations()) or None,
            timeout=timeout_s + SCHEDULE_S,
            expected=f"the scheduler to clear the allocation after its bindingTimeout ({timeout_s:g}s)",
        )
        seen.timed_out = True
        seen.in_flight = probe.now().get(seen.device)
        released, released_at = time.monotonic(), time.time()
        faults.release_fault(fault)  # the late attach completes
        extra = timeout_s + (claimed.count - 1) * ctx.profile.promises.attach_s
        seen.outcome = follow(ctx, history, node, bind_timeout(ctx.profile) + extra)
        cleared = [
            a.cleared_at for a in history.allocations() if a.cleared_at is not None and a.cleared_at > released_at
        ]
    used = {i for i in seen.outcome.final_identities() if i}
    # Every device the pod did not end with must be let go: the late one (and the timed-out allocation's others) from
    # the late attach's release; one attached for a later allocation that was cleared (seen in a soak, count-based:
    # the claim moved to the node-local copy of the late device, leaving the device of its second allocation idle 7 s
    # after the release) from that clearing, when it stopped being the claim's.
    seen.devices = _claim_devices(ctx, claimed.identities, node, began, seen.device)
    left = [d for d in seen.devices if d not in used]
    listed = first_listed(probe, node, began)
    later = [d for d in left if d != seen.device and listed.get(d, 0.0) > released_at]
    first = [d for d in left if d not in later]
    since = released + (max(cleared) - released_at if cleared else 0.0)
    detach_s = ctx.profile.promises.detach_s
    with ThreadPoolExecutor(max_workers=2) as pool:  # side by side: each measured from its own start as it happens
        firsts = pool.submit(let_go, ctx, first, claimed.lease, released, detach_s) if first else None
        laters = pool.submit(let_go, ctx, later, claimed.lease, since, detach_s) if later else None
        seen.let_go = firsts.result() if firsts else None
        seen.let_go_reallocated = laters.result() if laters else None
    ctx.cluster.core.delete_namespaced_pod("app", ns, grace_period_seconds=0)
    return seen


slow = shaped_fixture("slow", "prebind-delete-slow")
hang = shaped_fixture("hang", "prebind-delete-hang")
late = shaped_fixture("late", "late-attach-after-timeout")


def _check_prebind(walk: Walk) -> None:
    assert walk.in_flight is not None and walk.in_flight[1] != "attached", (
        f"the claim went away only after {walk.device} was attached ({walk.in_flight}): PreBind was not walked"
    )
    assert walk.let_go is not None
    problem = walk.let_go.problem()
    assert not problem, (
        f"{walk.devices} (the claim's devices; the attach of {walk.device} {walk.mode}, claim deleted while "
        f"attaching): {problem}"
    )


@pytest.mark.requirement("IMP-13")
def test_a_slowed_attach_whose_pod_was_deleted_leaves_nothing_attached(slow: Walk) -> None:
    _check_prebind(slow)


@pytest.mark.requirement("IMP-13")
def test_a_hung_attach_whose_pod_was_deleted_leaves_nothing_attached(hang: Walk) -> None:
    _check_prebind(hang)


def _check_backed(walk: Walk) -> None:
    assert not walk.unbacked, (
        f"binding conditions True before the fabric said the device was attached (each device's own attach; attach "
        f"{walk.mode}; the claim's devices {walk.devices}):\n  " + "\n  ".join(walk.unbacked)
    )


@pytest.mark.requirement("IMP-13")
def test_no_condition_claims_an_attach_that_did_not_happen(slow: Walk) -> None:
    _check_backed(slow)


@pytest.mark.requirement("IMP-13")
def test_no_condition_claims_a_hung_attach_that_did_not_happen(hang: Walk) -> None:
    _check_backed(hang)


@pytest.mark.requirement("IMP-14")
def test_the_pod_binds_after_a_late_attach(late: Walk) -> None:
    assert late.outcome is not None
    problems = late.outcome.binding_problems(timeouts=True)
    assert not problems, "\n".join(problems) + f"\n  {late.outcome.describe()}"


@pytest.mark.requirement("IMP-14")
def test_a_late_attach_does_not_stay_without_a_live_allocation(late: Walk) -> None:
    assert late.in_flight is not None and late.in_flight[1] != "attached", (
        f"{late.device} was attached before the binding timeout ({late.in_flight}): the late attach was not walked"
    )
    problems = [
        f"{what}: {problem}"
        for what, walked in (
            ("from the late attach's release", late.let_go),
            ("from the clearing of the later allocation they were attached for", late.let_go_reallocated),
        )
        if walked is not None and (problem := walked.problem())
    ]
    # none walked: the pod was bound with every device the fabric attached for it, each with a live allocation
    assert not problems, (
        f"of {late.devices} attached for the claim (the attach of {late.device} hung past its allocation's "
        f"timeout), those the pod was not bound with, " + "; ".join(problems)
    )
