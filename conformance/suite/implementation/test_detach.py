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

from conformance.cluster.manifests import pinned_pod
from conformance.observe.invariants import PERSIST_S
from conformance.suite.implementation.outcome import follow
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go
from conformance.suite.scenario import Context, result_fixture, scenario

SAMPLE_S = 0.2  # sampling period of the release observation: the resolution of the measured times


@dataclass
class Release:
    identity: str
    node: str
    attached_before: tuple[str, str] | None  # (node, state) in the probe while the pod was bound
    promise_s: float
    # From the release: detached_s (the probe no longer lists the device), after_s (detached and offered again),
    # last_seen (when the promise was broken: the probe and the free entries last seen).
    let_go: LetGo | None = None


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
    seen = Release(identity, node, probe.now().get(identity), ctx.profile.promises.detach_s)

    released = time.monotonic()
    delete_pod(ctx, ns, history)
    # Offered again means offered for good (for PERSIST_S: a transient free entry, e.g. between a guard's removal and a
    # pool rewrite, does not count); count-based, judged on this node (settle.let_go says why).
    seen.let_go = got = let_go(ctx, [identity], lease, released, seen.promise_s, interval=SAMPLE_S)
    if got.detached_s is not None:
        ctx.measure("detach_seconds", got.detached_s)
    if got.after_s is not None:
        ctx.measure("release_to_offered_seconds", got.after_s)
    return seen


release = result_fixture("release", "detach-on-release")


@pytest.mark.requirement("IMP-5")
def test_device_is_detached_within_the_promised_time(release: Release) -> None:
    assert release.attached_before and release.attached_before[0] == release.node, (
        f"while the pod was bound on {release.node} the probe said {release.attached_before}"
    )
    got = release.let_go
    assert got is not None and got.detached_s is not None and got.detached_s <= release.promise_s, (
        f"{release.identity} still attached {release.promise_s:g}s (detachSeconds) after the release\n"
        f"{got.last_seen if got else ''}"
    )


@pytest.mark.requirement("IMP-5")
def test_device_is_offered_free_again_exactly_once(release: Release) -> None:
    got = release.let_go
    assert got is not None and got.after_s is not None and got.after_s <= release.promise_s, (
        f"{release.identity} not offered again by exactly one free entry (for {PERSIST_S:g}s) within "
        f"{release.promise_s:g}s\n"
        f"{got.last_seen if got else ''}"
    )
