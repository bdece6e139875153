"""Headline scenario: attach before bind (SCH-2, SCH-3, SCH-4, IMP-1, IMP-2, IMP-3).

One pod, pinned to a node that has no node-local device of the implementation's driver but is reached by a fabric
pool, asks for one device. A watcher follows the claim, the pod and (if the profile has one) the fabric probe from
creation to binding; each test below asserts one requirement on what was observed. Condition names are read from
the published slices and the allocation, never assumed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import pinned_pod
from conformance.cluster.versions import parse_version
from conformance.cluster.waits import check_cancelled
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import LoadedProfile
from conformance.observe.slices import (
    device_conditions,
    driver_slices,
    fabric_slices,
    identity_of,
    probe_attachments,
)
from conformance.suite.scenario import Context, result_fixture, scenario

BIND_DEADLINE_S = 90.0
POLL_S = 0.1


@dataclass
class Flow:
    node: str
    slices: list[dict[str, Any]]
    claim: dict[str, Any] | None = None  # the allocated claim as last seen before/at binding
    first_allocation: dict[str, Any] | None = None
    bound_to: str | None = None
    bound_while_pending: list[str] = field(default_factory=list)  # condition types not True when the pod was bound
    nominated: set[str] = field(default_factory=set)
    pending_event: bool = False
    attached_at_bind: dict[str, str] = field(default_factory=dict)
    true_before_attach: list[str] = field(default_factory=list)  # "condition True while the fabric said not attached"
    probe: bool = False
    bound_after_s: float | None = None  # claim first seen allocated -> pod seen bound (sampled every POLL_S)


@scenario(
    "attach-before-bind",
    "one pod on a node without local devices gets a fabric device; followed from creation to binding",
    ("IMP-1", "SCH-2", "SCH-3", "SCH-4", "IMP-2", "IMP-3"),
)
def attach_before_bind(ctx: Context) -> Flow:
    node, _, ns = ctx.remote_fabric()
    slices = driver_slices(ctx.cluster, ctx.profile.driver)
    probe_url = ctx.implementation.resolve(ctx.profile.fabric_probe.url) if ctx.profile.fabric_probe else None
    ctx.objects.create(pinned_pod("app", "gpu", node), ns)
    flow = _watch(ctx.cluster, ns, node, slices, probe_url, identity_of(slices, ctx.profile.identity_attribute))
    if flow.bound_after_s is not None:
        ctx.measure("attach_to_bind_seconds", flow.bound_after_s)
    return flow


flow = result_fixture("flow", "attach-before-bind")


def _watch(
    cluster: Cluster,
    ns: str,
    node: str,
    slices: list[dict[str, Any]],
    probe_url: str | None,
    identities: dict[tuple[str, str], str],
) -> Flow:
    claims = cluster.kind("resource.k8s.io/v1", "ResourceClaim")
    seen = Flow(node=node, slices=slices, probe=probe_url is not None)
    deadline = time.monotonic() + BIND_DEADLINE_S
    allocated_at = time.time()
    while time.monotonic() < deadline:
        pod = cluster.core.read_namespaced_pod("app", ns)
        items = claims.get(namespace=ns).to_dict()["items"]
        claim = items[0] if items else None
        allocation = (claim or {}).get("status", {}).get("allocation")
        if allocation:
            seen.claim = claim
            if seen.first_allocation is None:
                seen.first_allocation, allocated_at = allocation, time.time()
            results = allocation["devices"]["results"]
            attached = probe_attachments(probe_url) if probe_url else {}
            for r in results:
                true = [
                    t
                    for t, s in device_conditions(claim, r).items()
                    if s == "True" and t in r.get("bindingConditions", [])
                ]
                ident = identities.get((r["pool"], r["device"]))
                note = f"{r['device']}: {true} True while the fabric says attached to {attached.get(ident)}"
                if true and probe_url and attached.get(ident) != node and note not in seen.true_before_attach:
                    seen.true_before_attach.append(note)
            if pod.status.nominated_node_name:
                seen.nominated.add(pod.status.nominated_node_name)
            if pod.spec.node_name:
                seen.bound_to = pod.spec.node_name
                for r in results:
                    conds = device_conditions(claim, r)
                    seen.bound_while_pending += [t for t in r.get("bindingConditions", []) if conds.get(t) != "True"]
                seen.attached_at_bind = attached
                seen.bound_after_s = round(time.time() - allocated_at, 3)
                break
        check_cancelled()
        time.sleep(POLL_S)  # the observation's sampling period, not a wait for the cluster
    events = cluster.core.list_namespaced_event(ns).items
    seen.pending_event = any(e.reason == "BindingConditionsPending" for e in events)
    return seen


def _fabric_results(flow: Flow) -> list[dict[str, Any]]:
    assert flow.first_allocation, f"the claim was never allocated within {BIND_DEADLINE_S:g}s"
    return [r for r in flow.first_allocation["devices"]["results"] if r.get("bindingConditions")]


@pytest.mark.requirement("IMP-1")
def test_fabric_devices_are_published_with_binding_fields(
    cluster: Cluster, implementation: Implementation, profile: LoadedProfile
) -> None:
    pools = fabric_slices(driver_slices(cluster, profile.profile.driver))
    assert pools, f"no slice of {profile.profile.driver} without nodeName offers devices with binding conditions"
    for s in pools:
        assert s["spec"].get("nodeSelector") or s["spec"].get("allNodes"), f"{s['metadata']['name']}: no reach"
        for d in s["spec"].get("devices") or []:
            assert d.get("bindsToNode") is True, f"{d['name']}: bindsToNode is not true"
            assert d.get("bindingConditions") and d.get("bindingFailureConditions"), f"{d['name']}: {d}"
            assert (d.get("attributes") or {}).get(profile.profile.identity_attribute), f"{d['name']}: no identity"


@pytest.mark.requirement("SCH-2")
def test_fallback_allocation_copies_conditions_and_pins_one_node(flow: Flow) -> None:
    results = _fabric_results(flow)
    assert results, "the pod on a node without local devices was not given a device with binding conditions"
    published = {
        (s["spec"]["pool"]["name"], d["name"]): d for s in flow.slices for d in (s["spec"].get("devices") or [])
    }
    for r in results:
        source = published[(r["pool"], r["device"])]
        assert r["bindingConditions"] == source["bindingConditions"]
        assert r["bindingFailureConditions"] == source["bindingFailureConditions"]
    assert flow.first_allocation.get("allocationTimestamp"), "allocationTimestamp not set"
    terms = flow.first_allocation["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [flow.node]}]}], terms


@pytest.mark.requirement("SCH-3")
def test_no_binding_before_all_conditions_are_true(flow: Flow, cluster: Cluster) -> None:
    assert flow.bound_to, f"the pod was not bound within {BIND_DEADLINE_S:g}s"
    assert not flow.bound_while_pending, f"bound while {flow.bound_while_pending} were not True"
    assert flow.pending_event, "no BindingConditionsPending event for the pod"
    if parse_version(cluster.info.version).release.nominates_while_waiting:  # NominatedNodeNameForExpectation
        assert flow.nominated <= {flow.node}, f"nominatedNodeName showed {flow.nominated}, expected {flow.node}"


@pytest.mark.requirement("SCH-4")
def test_binds_to_the_allocated_node(flow: Flow) -> None:
    _fabric_results(flow)
    assert flow.bound_to == flow.node, f"bound to {flow.bound_to}, allocation pinned {flow.node}"


@pytest.mark.requirement("IMP-2")
def test_device_is_attached_to_the_node_when_the_pod_binds(flow: Flow, profile: LoadedProfile) -> None:
    if not flow.probe:
        pytest.skip("the profile declares no fabricProbe: attachment cannot be observed")
    assert flow.bound_to, "the pod was not bound"
    identities = identity_of(flow.slices, profile.profile.identity_attribute)
    for r in _fabric_results(flow):
        ident = identities[(r["pool"], r["device"])]
        assert flow.attached_at_bind.get(ident) == flow.node, (
            f"{r['device']} ({ident}) at bind time: fabric says {flow.attached_at_bind.get(ident)}, pod on {flow.node}"
        )


@pytest.mark.requirement("IMP-3")
def test_conditions_true_only_after_the_attach(flow: Flow) -> None:
    if not flow.probe:
        pytest.skip("the profile declares no fabricProbe: the attach cannot be observed")
    _fabric_results(flow)
    assert not flow.true_before_attach, flow.true_before_attach
