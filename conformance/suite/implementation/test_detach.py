"""IMP-5 detach on release: once the pod and its claim are gone, the fabric detaches the device and the
implementation offers it free again, exactly once, within the time the profile promises (detachSeconds).

One pod, pinned to a node without node-local devices, binds with a leased fabric device (through its fabric
allocation or the node-local copy of it: outcome.py); the fabric probe must say it is attached there. Then the pod
and the claim are deleted, and the probe and the published slices are followed until the device is no longer
attached and exactly one free entry offers it again, for at least PERSIST_S (a transient offer does not count).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.observe.invariants import PERSIST_S
from conformance.suite.implementation.outcome import follow
from conformance.suite.scenario import Context, result_fixture, scenario

SAMPLE_S = 0.2  # sampling period of the release observation: the resolution of the measured times


@dataclass
class Release:
    identity: str
    node: str
    attached_before: tuple[str, str] | None  # (node, state) in the probe while the pod was bound
    promise_s: float
    detached_after_s: float | None = None  # release -> the probe no longer lists the device
    offered_after_s: float | None = None  # release -> detached and exactly one free entry
    last_seen: str = ""  # when the promise was broken: the probe and the free entries last seen


@scenario(
    "detach-on-release",
    "a bound pod's fabric device is detached and offered free again once the pod and claim are deleted",
    ("IMP-5",),
    probe=True,
)
def detach_on_release(ctx: Context) -> Release:
    assert ctx.invariants is not None, "the free entries are read from the session's invariant watcher"
    # Count-based: the node is the scenario's alone, so no other scenario's pod takes the released copy meanwhile
    # (a class of the model matches every copy of it).
    node, lease, ns = ctx.remote_fabric(exclusive=ctx.counted)
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    with ctx.history(ns) as history:
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        bound = follow(ctx, history, node)
    # The device the pod used: the node-local copy's (reschedule-to-local, counted entries), else the leased one.
    identity = next((i for i in bound.final_identities() if i), None) or next(iter(lease.identities), None)
    if identity is None:
        raise AssertionError(f"the pod's device has no physical identity in any slice:\n  {bound.describe()}")
    [claim] = history.latest("claim")
    seen = Release(identity, node, probe.now().get(identity), ctx.profile.promises.detach_s)

    released = time.monotonic()
    ctx.cluster.core.delete_namespaced_pod("app", ns, grace_period_seconds=0)
    try:
        ctx.cluster.resource.delete_namespaced_resource_claim(claim, ns)
    except ApiException as exc:
        if exc.status != 404:  # the resourceclaim controller may have removed the generated claim already
            raise
    met_since: list[float] = []  # start of the current stretch in which the device is detached and offered once
    # Count-based: once detached from this node the device is the fabric's again, and another scenario may attach it
    # elsewhere at once (settle.let_go says what the soak showed): judged on this node.
    where = node if lease.counted is not None else None

    def observe() -> tuple[tuple[str, str] | None, list[str]]:
        state = probe.now().get(identity)
        if where is not None and state is not None and state[0] != where:
            state = None  # detached from this node, attached elsewhere since
        if state is None and seen.detached_after_s is None:
            seen.detached_after_s = round(time.monotonic() - released, 3)
        free = ctx.invariants.free_entries(identity, where)
        if lease.counted is not None:
            # Offered again = its fabric offers (at least) every device it has free: a stack that never re-offers
            # a detached device stays one entry short for good. Not equality: other scenarios' attaches and
            # reschedules move both counts meanwhile, and the pool follows the fabric with a delay.
            # A device whose attach failed (another scenario's) may be withheld: counted_complete.
            complete, said = ctx.invariants.counted_complete(lease.counted.pool, lease.counted.model)
            back = not free and complete
            free = [said, *free]
        else:
            back = len(free) == 1
        if state is None and back:
            met_since[:] = met_since or [time.monotonic()]
        else:
            met_since.clear()
        return state, free

    try:
        # Offered again means offered for good: the stretch must last PERSIST_S (the watcher's own rule), so a
        # transient free entry (e.g. between a guard's removal and a pool rewrite) does not count.
        wait_for(
            observe,
            lambda _o: bool(met_since) and time.monotonic() - met_since[0] >= PERSIST_S,
            timeout=seen.promise_s + PERSIST_S,
            expected=f"{identity} detached (not in the probe) and offered by exactly one free entry "
            f"(count-based: detached from {node}, no copy of it offered there, and as many entries offered as the "
            "fabric has free devices) "
            f"for {PERSIST_S:g}s",
            describe=lambda o: f"probe: {o[0] if o else None}, free entries: {o[1] if o else None}",
            interval=SAMPLE_S,
            max_interval=SAMPLE_S,
        )
        seen.offered_after_s = round(met_since[0] - released, 3)
    except WaitTimeout as exc:
        seen.last_seen = str(exc)
    if seen.detached_after_s is not None:
        ctx.measure("detach_seconds", seen.detached_after_s)
    if seen.offered_after_s is not None:
        ctx.measure("release_to_offered_seconds", seen.offered_after_s)
    return seen


release = result_fixture("release", "detach-on-release")


@pytest.mark.requirement("IMP-5")
def test_device_is_detached_within_the_promised_time(release: Release) -> None:
    assert release.attached_before and release.attached_before[0] == release.node, (
        f"while the pod was bound on {release.node} the probe said {release.attached_before}"
    )
    assert release.detached_after_s is not None and release.detached_after_s <= release.promise_s, (
        f"{release.identity} still attached {release.promise_s:g}s (detachSeconds) after the release\n"
        f"{release.last_seen}"
    )


@pytest.mark.requirement("IMP-5")
def test_device_is_offered_free_again_exactly_once(release: Release) -> None:
    assert release.offered_after_s is not None and release.offered_after_s <= release.promise_s, (
        f"{release.identity} not offered again by exactly one free entry (for {PERSIST_S:g}s) within "
        f"{release.promise_s:g}s\n"
        f"{release.last_seen}"
    )
