"""The path's cost (COST-1..3, SHOULD): one pod's way to its binding, against what its binding model needs at least.

Only the outcome is judged elsewhere (IMP-2: bound where its device is attached). A stack that gets there through
needless detours — extra scheduling rounds, a reschedule asked for before the node-local copy can be allocated,
a device detached and attached again — passes those, and its users pay in time-to-bind and fabric operations.

Fair conditions, so that nothing but the implementation's own choices can make the path longer than the minimum:
- the scenario runs alone on the implementation (exclusive, like IMP-8's restarts): no other scenario's attach,
  release or fault shares its fabric, its workers or its scheduler rounds;
- a device class of its own: identified entries, the leased device and one spare reaching the same node (as a model
  class would: a needless reallocation has somewhere to go, and a correct one prefers the node-local copy, which
  the scheduler tries first); count-based entries, capacity on a node the scenario has to itself (the model's class:
  what is attached there meanwhile is its own);
- the leased devices free in the fabric (probe) and no node-local copy of the class left on the node before the pod.
Judged from the record (observe/pathcost.py): the claim's allocations and conditions with their revisions, the
probe's attaches and detaches, the binding. A detour fails with the timeline of the whole path.
"""

from __future__ import annotations

import time

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.waits import wait_for
from conformance.implementation.profile import LoadedProfile
from conformance.observe.devices import Lease
from conformance.observe.pathcost import PathCost, path_cost, time_bound
from conformance.suite.implementation.outcome import bind_timeout
from conformance.suite.scenario import NAMESPACE_READY_S, Context, result_fixture, scenario, skip_for_profile

FABRIC_PATHS = ("keep-in-pool", "reschedule-to-local")  # binding models whose path goes through a fabric attach


@scenario(
    "path-cost",
    "one pod alone on the implementation, with a node and a device class of its own: scheduling rounds, attaches "
    "and allocation-to-binding time against the binding model's minimum",
    ("COST-1", "COST-2", "COST-3"),
    exclusive=True,  # alone: no other scenario's work can lengthen its path
    probe_for=("COST-2",),  # attaches are counted from what the fabric says
)
def path_cost_scenario(ctx: Context) -> PathCost:
    if ctx.profile.binding_model not in FABRIC_PATHS:  # a readiness gate without a fabric (bindingModel node-local)
        pytest.skip(
            f"bindingModel {ctx.profile.binding_model}: path-cost follows a fabric device's path (attach, reschedule); "
            "a node-local readying's path is not measured by it"
        )
    node, lease, ns = ctx.remote_fabric(1 if ctx.counted else 2, exclusive=True)
    _wait_until_free(ctx, lease, node)
    prof = ctx.profile
    with ctx.history(ns) as history:
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        bound = time_bound(prof.binding_model, prof.promises.attach_s)
        history.wait(
            lambda h: h.binding(),
            timeout=max(bind_timeout(prof), bound) + NAMESPACE_READY_S,
            expected="the pod to be bound",
        )
        binding = history.binding()
        if ctx.probe is not None and binding is not None:
            ctx.probe.after(binding.at)  # every probe answer up to the binding is in the record
        cost = path_cost(
            model=prof.binding_model,
            node=node,
            devices=1,
            attach_s=prof.promises.attach_s,
            events=history.events(),
            allocations=history.allocations(),
            binding=binding,
            probe=ctx.record.select(("probe",)) if ctx.probe is not None else None,
            fabric_devices=set(lease.identities),
            whole_node=ctx.counted,
            meanings=dict(prof.failure_conditions),
        )
    ctx.measure("path_scheduling_rounds", cost.rounds)
    if cost.attaches is not None:
        ctx.measure("path_attaches_per_device", cost.attaches / cost.devices)
    if cost.seconds is not None:
        ctx.measure("path_allocation_to_binding_seconds", round(cost.seconds, 3))
    return cost


def _wait_until_free(ctx: Context, lease: Lease, node: str) -> None:
    """The leased devices free in the fabric, so the pod's path starts from nothing attached (a device an earlier
    scenario left attached would spare an attach, or cost a move the implementation did not choose). Count-based
    leases already waited for no node-local copy on their node (Context.lease)."""
    probe = ctx.probe
    if probe is None or ctx.counted:
        return
    wanted = set(lease.identities)
    wait_for(
        lambda: {i: s for i, s in probe.after(time.time()).items() if i in wanted},
        lambda held: not held,
        timeout=ctx.profile.promises.detach_s + NAMESPACE_READY_S,
        expected=f"the leased devices {sorted(wanted)} free in the fabric before the pod on {node} (an earlier "
        "scenario's attach is let go within promises.detachSeconds)",
    )


cost = result_fixture("cost", "path-cost")


def _detour(problems: list[str], cost: PathCost) -> str:
    return (
        "\n".join(problems)
        + f"\nthe path of the pod on {cost.node} (seconds from the first allocation, etcd revision or probe answer):\n"
        + cost.timeline()
    )


@pytest.mark.requirement("COST-1")
def test_scheduling_rounds_are_the_binding_models_minimum(cost: PathCost) -> None:
    problems = cost.rounds_problems()
    assert not problems, _detour(problems, cost)


@pytest.mark.requirement("COST-2")
def test_one_attach_per_device_and_no_detach_on_the_way(cost: PathCost, profile: LoadedProfile) -> None:
    skip_for_profile("path-cost", "COST-2", profile.profile)
    assert cost.attaches is not None, "the fabric probe's changes were not read"
    problems = cost.attach_problems()
    assert not problems, _detour(problems, cost)


@pytest.mark.requirement("COST-3")
def test_allocation_to_binding_within_the_promised_attach_and_one_poll(cost: PathCost) -> None:
    problems = cost.time_problems()
    assert not problems, _detour(problems, cost)
