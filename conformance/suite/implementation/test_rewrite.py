"""IMP-7 AllocationResult rewriting: an implementation that moves a claim from the fabric copy of a device to its
hot-plugged node-local copy does it only through deallocation + reallocation, never by rewriting the
allocation in place; the pod ends on the same node with the same physical device, and no device is allocated
twice in the window (the session's invariant watcher fails the scenario otherwise).

The pod is pinned to a node without node-local devices: the scheduler has no scoring that brings a rescheduled
claim back to the node of the hot-plugged copy, so only a pinned pod makes "same node, same device" a property
of the implementation rather than luck. Only for implementations claiming the capability `rescheduleToLocal`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.suite.implementation.outcome import Outcome, follow
from conformance.suite.scenario import Context, result_fixture, scenario


@dataclass
class Move:
    outcome: Outcome
    evaluations: tuple[int, int] = (0, 0)  # invariant watcher evaluations while the claim moved


@scenario(
    "reschedule-to-local",
    "a pinned pod's claim moves from the fabric copy to the hot-plugged node-local copy by reallocation",
    ("IMP-7",),
    capabilities=("rescheduleToLocal",),
    probe=True,
)
def reschedule_to_local(ctx: Context) -> Move:
    assert ctx.invariants is not None, "no double allocation in the window is checked by the invariant watcher"
    node, _, ns = ctx.remote_fabric(exclusive=ctx.counted)
    with ctx.history(ns) as history:
        before = ctx.invariants.evaluations
        created = time.monotonic()
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        seen = follow(ctx, history, node)
        ctx.measure("reschedule_to_local_bind_seconds", round(time.monotonic() - created, 3))
    return Move(seen, (before, ctx.invariants.evaluations))


move = result_fixture("move", "reschedule-to-local")


@pytest.mark.requirement("IMP-7")
def test_the_claim_moves_only_through_deallocation_and_reallocation(move: Move) -> None:
    seen = move.outcome
    assert seen.allocations and all(r.get("bindingConditions") for r in seen.allocations[0].results), (
        f"the first allocation is not a fabric copy:\n  {seen.describe()}"
    )
    assert seen.path == "local", f"the pod was not bound with a node-local copy:\n  {seen.describe()}"
    rewritten = [a.devices for a in seen.allocations if a.rewritten]
    assert not rewritten, f"allocation edited in place: {rewritten}\n  {seen.describe()}"
    # The way out of the fabric allocation is a failure condition the profile declares to mean reschedule (names
    # read from the allocation), not one that means failure, nor the binding timeout alone.
    assert not seen.detours(), "\n".join(seen.detours()) + f"\n  {seen.describe()}"
    assert seen.rescheduled(), f"no condition meaning reschedule was True on a fabric allocation:\n  {seen.describe()}"


@pytest.mark.requirement("IMP-7")
def test_the_pod_ends_on_the_same_node_with_the_same_physical_device(move: Move) -> None:
    problems = move.outcome.binding_problems()
    assert not problems, "\n".join(problems) + f"\n  {move.outcome.describe()}"


@pytest.mark.requirement("IMP-7")
def test_no_double_allocation_while_the_claim_moved(move: Move) -> None:
    # Any device held twice or offered twice in the window fails the scenario itself (the invariant watcher);
    # this checks that the watcher was evaluating while the claim moved.
    first, last = move.evaluations
    assert last > first, f"the invariant watcher made no evaluation while the claim moved ({first} -> {last})"
