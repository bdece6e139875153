"""Scheduler paths around binding conditions: node-local preference (SCH-1), a claim shared by several pods
(SCH-7) and a claim with several devices (SCH-8). Devices are the implementation's, leased per scenario;
condition names are read from the allocation results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from conformance.cluster.manifests import RESOURCE_API, claim_template, pod_with_claim_template
from conformance.implementation.faults import FaultInjector
from conformance.observe.slices import allocation_results, result_key
from conformance.observe.trace import Trace
from conformance.suite.scenario import Context, result_fixture, scenario

PENDING_EVENT = "BindingConditionsPending"
SHARED_PODS = 3
SLOW_ATTACH_S = 8.0  # one device of the multi-device claim attaches this much later than the other


def _deadline(ctx: Context) -> float:
    """How long a pod may take to bind: the promised attach time, the scheduler's 5 s poll, and slack."""
    return ctx.profile.promises.attach_s + 30.0


def _pinned(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


# --- SCH-1: node-local preference ---------------------------------------------------------------------------


@dataclass
class Preference:
    node: str
    local: str
    results: list[dict[str, Any]]
    bound_to: str | None
    pending_events: int


@scenario(
    "node-local-preference",
    "a claim that matches a node-local device and a fabric device on the same node gets the node-local one",
    ("SCH-1",),
)
def node_local_preference(ctx: Context) -> Preference:
    pool = ctx.pool
    nodes = [n.name for n in ctx.cluster.info.nodes if pool.count("local", n.name) and pool.count("fabric", n.name)]
    if not nodes:
        pytest.skip("no node has both a node-local device and a reaching fabric device of the implementation")
    node = nodes[0]
    local = ctx.lease(1, "local", node)
    fabric = ctx.lease(1, "fabric", node)
    both = ctx.device_class(local, fabric)
    ns = ctx.namespace()
    ctx.objects.create(claim_template("gpu", both), ns)
    ctx.objects.create(_pinned(pod_with_claim_template("app", "gpu"), node), ns)
    trace = Trace(ns).follow(ctx.cluster, lambda t: "app" in t.bound, _deadline(ctx), f"pod {ns}/app bound")
    claim = next(iter(trace.claims.values()))
    return Preference(
        node,
        local.identities[0],
        allocation_results(claim),
        trace.bound["app"][0],
        trace.events(ctx.cluster, PENDING_EVENT).get("app", 0),
    )


preference = result_fixture("preference", "node-local-preference")


@pytest.mark.requirement("SCH-1")
def test_node_local_device_is_preferred(preference: Preference) -> None:
    assert len(preference.results) == 1, preference.results
    result = preference.results[0]
    assert not result.get("bindingConditions"), f"got the fabric copy {result_key(result)} over the node-local one"
    assert preference.bound_to == preference.node
    assert preference.pending_events == 0, "a node-local allocation must not wait in PreBind"


# --- SCH-7: shared claim ------------------------------------------------------------------------------------


@dataclass
class Shared:
    node: str
    trace: Trace
    pods: list[str]
    pending_events: dict[str, int]


@scenario(
    "shared-claim",
    f"one claim with a fabric device, referenced by {SHARED_PODS} pods: all wait in PreBind, then all bind",
    ("SCH-7",),
    capabilities=("sharedClaims",),
)
def shared_claim(ctx: Context) -> Shared:
    lease = ctx.lease(1, "fabric")
    node = sorted(lease.devices[0].nodes)[0]
    ns = ctx.namespace()
    request = {"name": "dev", "exactly": {"deviceClassName": ctx.device_class(lease), "count": 1}}
    ctx.objects.create(
        {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [request]}},
        },
        ns,
    )
    pods = [f"app-{i}" for i in range(SHARED_PODS)]
    for name in pods:
        pod = _pinned(pod_with_claim_template(name, "unused"), node)
        pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": "shared"}]
        ctx.objects.create(pod, ns)
    trace = Trace(ns).follow(
        ctx.cluster, lambda t: set(pods) <= set(t.bound), _deadline(ctx), f"pods {pods} of {ns} bound"
    )
    return Shared(node, trace, pods, trace.events(ctx.cluster, PENDING_EVENT))


shared = result_fixture("shared", "shared-claim")


@pytest.mark.requirement("SCH-7")
def test_shared_claim_every_pod_waits_then_binds(shared: Shared) -> None:
    claim = shared.trace.claims["shared"]
    assert any(r.get("bindingConditions") for r in allocation_results(claim)), "the shared claim got no fabric device"
    ready = shared.trace.ready_at.get("shared")
    assert ready, "the shared claim's binding conditions were never seen all True"
    waited = [p for p in shared.pods if shared.pending_events.get(p)]
    assert waited == shared.pods, f"pods with a {PENDING_EVENT} event: {waited} of {shared.pods}"
    for pod in shared.pods:
        node, _ = shared.trace.bound[pod]
        assert node == shared.node, f"{pod} bound to {node}, the claim is allocated on {shared.node}"
    reserved = sorted(r["name"] for r in claim["status"].get("reservedFor", []))
    assert reserved == sorted(shared.pods), f"reservedFor {reserved}"


# --- SCH-8: multi-device claim ------------------------------------------------------------------------------


@dataclass
class Multi:
    trace: Trace
    slow: str  # identity of the device whose attach was slowed
    identities: dict[tuple[str, str, str], str]


@scenario(
    "multi-device-claim",
    f"one claim with two fabric devices, one attaching {SLOW_ATTACH_S:g}s later: the pod waits for both",
    ("SCH-8",),
    capabilities=("multiDeviceClaims",),
    faults=True,
)
def multi_device_claim(ctx: Context) -> Multi:
    node = next((n.name for n in ctx.cluster.info.nodes if ctx.pool.count("fabric", n.name) >= 2), None)
    if node is None:
        pytest.skip("no node is reached by two fabric devices of the implementation")
    lease = ctx.lease(2, "fabric", node)
    slow = lease.identities[1]
    url = ctx.implementation.resolve(ctx.profile.fault_injector.url)
    with FaultInjector(url, frozenset(lease.identities)) as faults:
        faults.arm("slow", slow, delaySeconds=SLOW_ATTACH_S)
        ns = ctx.namespace()
        ctx.objects.create(claim_template("gpus", ctx.device_class(lease), count=2), ns)
        ctx.objects.create(_pinned(pod_with_claim_template("app", "gpus"), node), ns)
        trace = Trace(ns).follow(
            ctx.cluster, lambda t: "app" in t.bound, _deadline(ctx) + SLOW_ATTACH_S, f"pod {ns}/app bound"
        )
    by_device = {copy: d.identity for d in lease.devices for copy in d.copies}
    identities = {key: by_device.get((key[1], key[2]), "?") for c in trace.claims.values() for key in _keys(c)}
    return Multi(trace, slow, identities)


def _keys(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [result_key(r) for r in allocation_results(claim)]


multi = result_fixture("multi", "multi-device-claim")


@pytest.mark.requirement("SCH-8")
def test_every_device_of_a_claim_gates_binding(multi: Multi) -> None:
    claim = next(iter(multi.trace.claims.values()))
    results = allocation_results(claim)
    assert len(results) == 2 and all(r.get("bindingConditions") for r in results), results
    name = claim["metadata"]["name"]
    _, bound_at = multi.trace.bound["app"]
    last_true = {}
    for r in results:
        times = [multi.trace.true_at.get((name, result_key(r), t)) for t in r["bindingConditions"]]
        assert all(times), f"{result_key(r)}: conditions {r['bindingConditions']} not all seen True"
        last_true[multi.identities[result_key(r)]] = max(times)
    fast = min(last_true.values())
    slow = last_true.get(multi.slow)
    assert slow and slow > fast, f"the slowed device did not become ready after the other one: {last_true}"
    assert bound_at >= slow, f"bound {slow - bound_at:.2f}s before the slowed device's conditions were True"
