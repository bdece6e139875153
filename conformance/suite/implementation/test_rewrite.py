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
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.observe.slices import (
    BIND_SLACK_S,
    ClaimHistory,
    bound_pod,
    driver_slices,
    identity_of,
    pod_claim,
    probe_states,
)
from conformance.suite.scenario import Context, result_fixture, scenario


@dataclass
class Move:
    node: str
    identity: str
    bound_to: str
    first: list[dict[str, Any]]  # results of the first allocation
    final: list[dict[str, Any]]  # results of the allocation the pod bound with
    allocations: list[Any]  # the claim's allocation history: (pool, device, node) per result, None = cleared
    rewrites: list[str]
    true_conditions: list[str]
    identities: dict[tuple[str, str], str]  # (pool, device) -> physical identity of every copy seen
    local_slices: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (pool, device) -> nodeName
    attached: tuple[str, str] | None = None  # the probe once the pod was bound
    evaluations: tuple[int, int] = (0, 0)


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return claim["status"]["allocation"]["devices"]["results"]


@scenario(
    "reschedule-to-local",
    "a pinned pod's claim moves from the fabric copy to the hot-plugged node-local copy by reallocation",
    ("IMP-7",),
    capabilities=("rescheduleToLocal",),
    probe=True,
)
def reschedule_to_local(ctx: Context) -> Move:
    assert ctx.invariants is not None, "no double allocation in the window is checked by the invariant watcher"
    node, lease, ns = ctx.remote_fabric()
    [device] = lease.devices
    probe = ctx.implementation.resolve(ctx.profile.fabric_probe.url)
    with ClaimHistory(ctx.cluster, {ns}) as history:
        before = ctx.invariants.evaluations
        created = time.monotonic()
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        pod = bound_pod(ctx.cluster, ns, "app", 2 * (ctx.profile.promises.attach_s + BIND_SLACK_S))
        ctx.measure("reschedule_to_local_bind_seconds", round(time.monotonic() - created, 3))
        claim = pod_claim(ctx.cluster, ns, "app")
        slices = driver_slices(ctx.cluster, ctx.profile.driver)
        attached = probe_states(probe).get(device.identity)
        evaluations = (before, ctx.invariants.evaluations)
    name = f"{ns}/{claim['metadata']['name']}"
    # The fabric copy may have left the pool by now: its identity is known from the lease.
    identities = identity_of(slices, ctx.profile.identity_attribute) | dict.fromkeys(device.copies, device.identity)
    return Move(
        node=node,
        identity=device.identity,
        bound_to=pod.spec.node_name,
        first=_results(history.first_allocated[name]),
        final=_results(claim),
        allocations=history.allocations(name),
        rewrites=history.in_place_rewrites(),
        true_conditions=history.true_conditions.get(name, []),
        identities=identities,
        local_slices={
            (s["spec"]["pool"]["name"], d["name"]): s["spec"].get("nodeName")
            for s in slices
            for d in s["spec"].get("devices") or []
        },
        attached=attached,
        evaluations=evaluations,
    )


move = result_fixture("move", "reschedule-to-local")


@pytest.mark.requirement("IMP-7")
def test_the_claim_moves_only_through_deallocation_and_reallocation(move: Move) -> None:
    assert all(r.get("bindingConditions") for r in move.first), f"first allocation is not a fabric copy: {move.first}"
    assert not any(r.get("bindingConditions") for r in move.final), f"bound with a fabric copy: {move.final}"
    assert not move.rewrites, f"allocation rewritten in place: {move.rewrites}"
    allocated = [i for i, a in enumerate(move.allocations) if a is not None]
    assert None in move.allocations[allocated[0] : allocated[-1]], f"no deallocation between: {move.allocations}"
    # The way out of the fabric allocation is one of its failure conditions (names read from the allocation).
    failures = {t for r in move.first for t in r.get("bindingFailureConditions") or []}
    assert failures & set(move.true_conditions), (
        f"none of the failure conditions {sorted(failures)} was True; True were {move.true_conditions}"
    )


@pytest.mark.requirement("IMP-7")
def test_the_pod_ends_on_the_same_node_with_the_same_physical_device(move: Move) -> None:
    assert move.bound_to == move.node, f"pinned to {move.node}, bound to {move.bound_to}"
    first = {move.identities.get((r["pool"], r["device"])) for r in move.first}
    final = {move.identities.get((r["pool"], r["device"])) for r in move.final}
    assert first == final == {move.identity}, f"physical device: first {first}, final {final}, leased {move.identity}"
    where = {move.local_slices.get((r["pool"], r["device"])) for r in move.final}
    assert where == {move.node}, f"the final copy is published for {where}, not the node-local slice of {move.node}"
    assert move.attached and move.attached[0] == move.node, f"the probe says {move.attached}"


@pytest.mark.requirement("IMP-7")
def test_no_double_allocation_while_the_claim_moved(move: Move) -> None:
    # Any device held twice or offered twice in the window fails the scenario itself (the invariant watcher);
    # this checks that the watcher was evaluating while the claim moved.
    first, last = move.evaluations
    assert last > first, f"the invariant watcher made no evaluation while the claim moved ({first} -> {last})"
