"""Headline scenario of the node-local readiness gate (bindingModel node-local): RDY-1..RDY-4.

A pod asks for two of the implementation's node-local devices on one node (one claim, two devices). Where the profile
has a fault injector, the readying of one of them is slowed (its preparation takes longer), so the two devices become
ready at different moments and each device's conditions are judged on their own. The claim and pod are followed from
creation to binding while the readiness probe is sampled: each binding condition may be True only once the probe says
its device is ready on the allocation's node, and the pod may bind only once every device of its claim is.

RDY-1's evidence (the slices, the first allocation) exists before the pod binds: it is judged even if the wait for
the binding then fails, which is RDY-2's failure (the conditions were not written); RDY-3 and RDY-4 are then not
judged (suite/judged.py).
"""

from __future__ import annotations

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import claim_template, pod_with_claim_template
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import LoadedProfile
from conformance.observe.slices import device_identity, driver_slices
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.implementation.readiness import (
    Gate,
    gated_node,
    judge,
    require_model,
    sampler,
    wait_bound,
)
from conformance.suite.scenario import Context, Step, result_fixture, scenario, skip_for_profile

SLOWED_S = 3.0  # the slowed device's readying takes this much longer
ALLOCATED, BOUND = "the first allocation", "the pod bound"


@scenario(
    "readiness-gate",
    "one pod, one claim of two node-local devices on one node (one of them readied slower): followed from creation "
    "to binding against the readiness probe",
    ("RDY-1", "RDY-2", "RDY-3", "RDY-4"),
    readiness_for=("RDY-3", "RDY-4"),  # judged on what the readiness probe says is ready
    remote=False,
    steps=(
        Step(ALLOCATED, evidence=("RDY-1",), owes=("RDY-1",)),  # gated devices published, the claim allocated
        Step(BOUND, evidence=("RDY-2", "RDY-3", "RDY-4"), owes=("RDY-2",)),  # a pod not bound: conditions not written
    ),
)
def readiness_gate(ctx: Context) -> Gate:
    require_model(ctx)
    node, lease = gated_node(ctx, 2)
    ns = ctx.namespace()
    ctx.objects.create(claim_template("gpu", ctx.device_class(lease), count=2), ns)
    injector = None
    if ctx.profile.fault_injector is not None:
        url = ctx.implementation.resolve(ctx.profile.fault_injector.url)
        injector = FaultInjector(url, frozenset(lease.identities))
    with sampler(ctx, lease) as probe, ctx.history(ns) as history:
        try:
            if injector is not None:
                injector.arm("slow", lease.identities[1], delaySeconds=SLOWED_S)
            ctx.objects.create(pod_with_claim_template("app", "gpu"), ns)
            history.wait(lambda h: h.allocations(), timeout=SCHEDULE_S, expected="the pod's claim allocated")
            ctx.step(ALLOCATED, lambda: _so_far(ctx, history, node))
            wait_bound(ctx, history, extra_s=SLOWED_S)
            ctx.step(BOUND, lambda: _so_far(ctx, history, node))
            gate = judge(ctx, history, node, probe)
        finally:
            if injector is not None:
                injector.close()
    gate.slices = driver_slices(ctx.cluster, ctx.profile.driver)
    if gate.ready_to_bind is not None:
        ctx.measure("ready_to_bind_seconds", gate.ready_to_bind)
    return gate


def _so_far(ctx: Context, history: History, node: str) -> Gate:
    """The gate as far as the record shows it (no probe asked): what RDY-1 judges if the binding never comes."""
    gate = judge(ctx, history, node, None)
    gate.slices = driver_slices(ctx.cluster, ctx.profile.driver)
    return gate


gate = result_fixture("gate", "readiness-gate")


@pytest.mark.requirement("RDY-1")
def test_node_local_devices_carry_the_conditions_and_the_allocation_copies_them(
    gate: Gate, cluster: Cluster, profile: LoadedProfile
) -> None:
    prof = profile.profile
    published: dict[tuple[str, str], dict[str, object]] = {}
    for s in gate.slices:
        for d in s["spec"].get("devices") or []:
            published[(s["spec"]["pool"]["name"], d["name"])] = {**d, "allNodes": s["spec"].get("allNodes")}
    gated = [k for k, d in published.items() if d.get("bindingConditions")]
    assert gated, f"no device of {prof.driver} is published with bindingConditions"
    problems = []
    for key in gated:
        d = published[key]
        if d.get("allNodes") or d.get("bindsToNode"):
            problems.append(
                f"{key}: a device with binding conditions offered as a fabric device (allNodes/bindsToNode)"
            )
        if not d.get("bindingFailureConditions"):
            problems.append(f"{key}: bindingConditions without bindingFailureConditions")
        if not device_identity(d, prof.identity_attribute, prof.driver):  # type: ignore[arg-type]
            problems.append(f"{key}: no {prof.identity_attribute} attribute (the readiness probe names devices by it)")
    assert gate.allocations, f"the claim was never allocated:\n  {gate.describe()}"
    for result in gate.allocations[0].results:
        key = (result["pool"], result["device"])
        device = published.get(key)
        if device is None:
            problems.append(f"{key}: allocated, but no longer published (cannot compare its conditions)")
            continue
        for field in ("bindingConditions", "bindingFailureConditions"):
            if sorted(result.get(field) or []) != sorted(device.get(field) or []):  # type: ignore[arg-type]
                problems.append(
                    f"{key}: the allocation's {field} {result.get(field)} != the slice's {device.get(field)}"
                )
    assert not problems, "\n".join(problems)


@pytest.mark.requirement("RDY-2")
def test_conditions_are_written_per_allocated_device_of_its_own_driver(gate: Gate, profile: LoadedProfile) -> None:
    assert gate.binding is not None, f"the pod never bound:\n  {gate.describe()}"
    final = gate.allocations[-1]
    assert len(final.devices) == 2, f"the claim asked for 2 devices, the allocation has {final.devices}"
    problems = []
    for r in final.results:
        if r["driver"] != profile.profile.driver:
            problems.append(f"{r['pool']}/{r['device']}: allocated from driver {r['driver']}")
        for condition in r.get("bindingConditions") or []:
            if (r["pool"], r["device"], condition) not in final.true_at:
                problems.append(f"{r['pool']}/{r['device']}: {condition} never True in its own status.devices entry")
    assert not problems, "\n".join(problems) + f"\n  {gate.describe()}"


@pytest.mark.requirement("RDY-3")
def test_conditions_true_only_once_the_device_is_ready(gate: Gate, profile: LoadedProfile) -> None:
    skip_for_profile("readiness-gate", "RDY-3", profile.profile)
    assert gate.judged, f"no binding condition was seen True:\n  {gate.describe()}"
    assert not gate.early, "\n".join(gate.early) + f"\n  {gate.describe()}"


@pytest.mark.requirement("RDY-4")
def test_the_pod_binds_only_once_every_device_is_ready_on_its_node(gate: Gate, profile: LoadedProfile) -> None:
    skip_for_profile("readiness-gate", "RDY-4", profile.profile)
    assert gate.binding is not None, f"the pod never bound:\n  {gate.describe()}"
    assert not gate.unready_binding, "\n".join(gate.unready_binding) + f"\n  {gate.describe()}"
