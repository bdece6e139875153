"""Headline scenario: attach before bind (IMP-1, IMP-2, IMP-3), judged by outcome under either binding model.

One pod, pinned to a node that has no node-local device of the implementation's driver but is reached by a fabric
pool, asks for one device. Its claim and pod are watched from creation to binding and the fabric probe is read at
the moments that matter (see outcome.py): the pod must end bound on that node with a device the fabric says is
attached there, through its fabric allocation (keep-in-pool) or through a reschedule onto the node-local copy of
that device (reschedule-to-local). Condition names are read from the published slices and the allocation.

IMP-1's evidence (the published slices) exists before the pod: it is judged even if the wait for the binding then
fails, which is IMP-2's failure (the pod did not end bound where its device is attached); IMP-3 is then not judged.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import pinned_pod
from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import LoadedProfile
from conformance.observe.attachments import attaches
from conformance.observe.reach import explain, pool_reach
from conformance.observe.slices import device_identity, driver_slices, fabric_slices, model_disagreements
from conformance.suite.cluster.owned import usable_nodes
from conformance.suite.implementation.outcome import Outcome, follow, outcome
from conformance.suite.phases import ForeignFree
from conformance.suite.scenario import Context, Step, result_fixture, scenario, skip_for_profile

REACHED, BOUND = "a node reached by a fabric device", "the pod bound"


@scenario(
    "attach-before-bind",
    "one pod on a node without local devices gets a fabric device; followed from creation to binding",
    ("IMP-1", "IMP-2", "IMP-3"),
    probe_for=("IMP-2", "IMP-3"),  # judged on what the fabric says is attached
    steps=(
        Step(REACHED, evidence=("IMP-1",), owes=("IMP-1",)),  # what it owes: published devices that reach a node
        Step(BOUND, evidence=("IMP-2", "IMP-3"), owes=("IMP-2",)),
    ),
)
def attach_before_bind(ctx: Context) -> Outcome:
    # Count-based: the node is the scenario's alone, with no idle copy the pod could take without an attach.
    node, _, ns = ctx.remote_fabric(exclusive=ctx.counted)
    with ctx.history(ns) as history:
        ctx.step(REACHED, lambda: outcome(ctx, history, node))
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        seen = follow(ctx, history, node)
        ctx.step(BOUND, lambda: seen)
    if seen.binding and seen.allocations:
        ctx.measure("attach_to_bind_seconds", round(seen.binding.at - seen.allocations[0].at, 3))
        # The path's cost (figures, not a verdict): scheduling rounds and fabric attaches on the way to the binding.
        ctx.measure("allocations_per_claim", len(seen.allocations))
        if ctx.probe is not None:
            devices = {i for i in seen.identity.values() if i}
            count = attaches(ctx.record.select(("probe",)), devices, node, seen.allocations[0].at, seen.binding.at)
            ctx.measure("attaches_per_bound_pod", count)
    return seen


flow = result_fixture("flow", "attach-before-bind")


@pytest.mark.requirement("IMP-1")
def test_fabric_devices_are_published_with_binding_fields(
    cluster: Cluster, implementation: Implementation, profile: LoadedProfile, foreign_free_phase: ForeignFree
) -> None:
    """Read in the foreign-free phase (other drivers' claims may stop a stack's publishing: that is IMP-17's), once
    the implementation has published, up to its promise counted from the phase's opening."""
    prof = profile.profile

    def published() -> tuple[list[dict[str, Any]], list[NodeSpec], list[str]]:
        pools = fabric_slices(driver_slices(cluster, prof.driver))
        nodes = [NodeSpec(n.metadata.name, dict(n.metadata.labels or {})) for n in cluster.core.list_node().items]
        usable = [n for n in nodes if n.name in set(usable_nodes(cluster))]
        return pools, usable, sorted(p for p, names in pool_reach(pools, usable).items() if not names)

    left = (foreign_free_phase.publish_deadline or 0.0) - time.time()
    with contextlib.suppress(WaitTimeout):  # judged below on what is there at the promise
        wait_for(published, lambda got: bool(got[0]) and not got[2], timeout=max(0.1, left), expected="pools")
    pools, usable, unreached = published()
    assert pools, f"no slice of {prof.driver} without nodeName offers devices with binding conditions"
    # Identified entries name their physical device; counted entries name their model (capacity of that model).
    label = prof.identity_attribute if prof.fabric_entries == "identified" else prof.model_attribute
    # Every fabric pool reaches a Ready schedulable node (what the implementation owes within publishSeconds).
    assert not unreached, f"fabric pools {unreached} reach no Ready schedulable node: {explain(pools, usable, set())}"
    for s in pools:
        assert s["spec"].get("nodeSelector") or s["spec"].get("allNodes"), f"{s['metadata']['name']}: no reach"
        for d in s["spec"].get("devices") or []:
            assert d.get("bindsToNode") is True, f"{d['name']}: bindsToNode is not true"
            assert d.get("bindingConditions") and d.get("bindingFailureConditions"), f"{d['name']}: {d}"
            assert device_identity(d, label, prof.driver), f"{d['name']}: no {label} ({prof.fabric_entries} entries)"


@pytest.mark.requirement("IMP-1")
def test_the_declared_binding_model_is_what_the_slices_publish(
    flow: Outcome, cluster: Cluster, profile: LoadedProfile
) -> None:
    prof = profile.profile
    slices = driver_slices(cluster, prof.driver)
    problems = model_disagreements(
        slices,
        binding_model=prof.binding_model,
        fabric_entries=prof.fabric_entries,
        identity_attribute=prof.identity_attribute,
        model_attribute=prof.model_attribute,
        failure_conditions=dict(prof.failure_conditions),
    )
    # What the headline pod went through says which model the stack runs: keep-in-pool binds with the fabric
    # allocation it got; reschedule-to-local sends it back with a condition meaning reschedule (the copy it then
    # lands on may be taken by another pod first; a stack may then keep the fabric copy).
    if flow.binding is not None:
        rescheduled = bool(flow.rescheduled())
        if prof.binding_model == "keep-in-pool" and (rescheduled or flow.path != "fabric"):
            problems.append(f"the profile declares keep-in-pool, but the claim moved:\n  {flow.describe()}")
        if prof.binding_model == "reschedule-to-local" and not rescheduled:
            problems.append(
                f"the profile declares reschedule-to-local, but no condition meaning reschedule was True:\n  "
                f"{flow.describe()}"
            )
    assert not problems, "the profile disagrees with the implementation:\n" + "\n".join(problems)


@pytest.mark.requirement("IMP-2")
def test_the_pod_binds_where_the_fabric_says_its_device_is_attached(flow: Outcome, profile: LoadedProfile) -> None:
    skip_for_profile("attach-before-bind", "IMP-2", profile.profile)
    problems = flow.binding_problems()
    assert not problems, "\n".join(problems) + f"\n  {flow.describe()}"


@pytest.mark.requirement("IMP-3")
def test_conditions_true_only_after_the_attach(flow: Outcome, profile: LoadedProfile) -> None:
    skip_for_profile("attach-before-bind", "IMP-3", profile.profile)
    assert flow.judged, f"no binding or reschedule condition was seen True on a fabric allocation:\n  {flow.describe()}"
    assert not flow.early, "\n".join(flow.early)
    assert not flow.unidentified, f"the fabric entries {flow.unidentified} could not be tied to a physical device"
