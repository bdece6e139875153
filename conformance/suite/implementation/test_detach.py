"""IMP-5 detach on release: once the pod and its claim are gone, the fabric detaches the device and the
implementation offers it free again, exactly once, within the time the profile promises (detachSeconds).

One pod, pinned to a node without node-local devices, binds with leased fabric devices (through its fabric
allocation or the node-local copies: outcome.py); the fabric probe must say each is attached there. Then the pod
and the claim are deleted, and the probe and the published slices are followed until no device of the claim is
attached any more and each is offered again by exactly one free entry, for at least PERSIST_S (a transient offer
does not count). Two claim shapes (shape.py): one device, and `devicesPerClaim` devices over two requests, each
device judged on its own (a stack that lets go of the first device of a claim only fails on the others).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.observe.invariants import PERSIST_S
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go
from conformance.suite.implementation.shape import Shape, bound_devices, shaped_claim, shaped_fixture, shaped_scenario
from conformance.suite.scenario import Context

SAMPLE_S = 0.2  # sampling period of the release observation: the resolution of the measured times


@dataclass
class Release:
    identities: list[str]  # every device the pod ended with
    node: str
    attached_before: dict[str, tuple[str, str] | None]  # device -> (node, state) in the probe while the pod was bound
    promise_s: float
    # From the release: detached_s (the probe no longer lists them), after_s (detached and offered again), per device
    # gone_s and last (when the promise was broken: the probe and the free entries last seen of each).
    let_go: LetGo | None = None


@shaped_scenario(
    "detach-on-release",
    "a bound pod's fabric devices are detached and offered free again once the pod and claim are deleted",
    ("IMP-5",),
    probe=True,
)
def detach_on_release(ctx: Context, shape: Shape) -> Release:
    assert ctx.invariants is not None, "the free entries are read from the session's invariant watcher"
    # Count-based: the node is the scenario's alone, so no other scenario's pod takes the released copy meanwhile
    # (a class of the model matches every copy of it).
    claimed = shaped_claim(ctx, shape, exclusive=ctx.counted)
    node, ns = claimed.node, claimed.ns
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    with ctx.history(ns) as history:
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        _, identities = bound_devices(ctx, claimed, history)
    now = probe.now()
    seen = Release(identities, node, {i: now.get(i) for i in identities}, ctx.profile.promises.detach_s)

    released = time.monotonic()
    delete_pod(ctx, ns, history)
    # Offered again means offered for good (for PERSIST_S: a transient free entry, e.g. between a guard's removal and a
    # pool rewrite, does not count); count-based, judged on this node (settle.let_go says why).
    seen.let_go = got = let_go(ctx, identities, claimed.lease, released, seen.promise_s, interval=SAMPLE_S)
    for gone in got.gone_s.values():
        ctx.measure("detach_seconds", gone)
    if got.after_s is not None:
        ctx.measure("release_to_offered_seconds", got.after_s)
    return seen


release = shaped_fixture("release", "detach-on-release")


@pytest.mark.requirement("IMP-5")
def test_device_is_detached_within_the_promised_time(release: Release) -> None:
    away = {d: s for d, s in release.attached_before.items() if not s or s[0] != release.node}
    assert not away, f"while the pod was bound on {release.node} the probe said {away}"
    got = release.let_go
    assert got is not None
    late = [d for d in release.identities if got.gone_s.get(d, release.promise_s + 1) > release.promise_s]
    assert not late, (
        f"{late} of the claim's {release.identities} still attached {release.promise_s:g}s (detachSeconds) after "
        "the release, each device judged on its own:\n"
        + "\n".join(f"  {line}" for line in got.per_device())
        + f"\n{got.last_seen}"
    )


@pytest.mark.requirement("IMP-5")
def test_device_is_offered_free_again_exactly_once(release: Release) -> None:
    got = release.let_go
    assert got is not None and got.after_s is not None and got.after_s <= release.promise_s, (
        f"{release.identities} not all detached and offered again by exactly one free entry each (for {PERSIST_S:g}s) "
        f"within {release.promise_s:g}s\n" + (got.problem() if got else "")
    )
