"""SCH-7: a claim with a fabric device shared by several pods: every pod waits in PreBind, then all bind.

The suite's driver publishes one fabric device reaching one node; one ResourceClaim is referenced by SHARED_PODS
pods. The suite writes the binding condition only once every pod has shown BindingConditionsPending, then every pod
must bind on the claim's node, after that write, and be in the claim's reservedFor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.manifests import RESOURCE_API, pod_with_claim_template
from conformance.observe.views import SCHEDULE_S, Binding
from conformance.suite.cluster.owned import PREBIND_POLL_S, hold, pinned, start, wait_pending
from conformance.suite.scenario import ClusterContext, result_fixture, scenario

SHARED_PODS = 3


@dataclass
class Shared:
    node: str
    pods: list[str]
    pending: dict[str, int] = field(default_factory=dict)
    early: Binding | None = None
    ready_write: int = 0
    bindings: dict[str, Binding] = field(default_factory=dict)
    claim: dict[str, Any] = field(default_factory=dict)
    stopped: str = ""


@scenario(
    "shared-claim",
    f"one claim with a fabric device, referenced by {SHARED_PODS} pods: all wait in PreBind, then all bind",
    ("SCH-7",),
    implementation=False,
)
def shared_claim(ctx: ClusterContext) -> Shared:
    driver, nodes = start(ctx)
    run = Shared(nodes[0], [f"app-{i}" for i in range(SHARED_PODS)])
    driver.fabric_pool([run.node])
    ns = driver.namespace
    request = {"name": "dev", "exactly": {"deviceClassName": driver.device_class(), "count": 1}}
    claim = {"apiVersion": RESOURCE_API, "kind": "ResourceClaim", "metadata": {"name": "shared"}}
    ctx.objects.create({**claim, "spec": {"devices": {"requests": [request]}}}, ns)
    with ctx.history(ns) as history:
        for name in run.pods:
            pod = pod_with_claim_template(name, "unused")
            pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": "shared"}]
            ctx.objects.create(pinned(pod, run.node), ns)
        try:
            allocation = history.wait(
                lambda h: next(iter(h.allocations()), None), timeout=SCHEDULE_S, expected="the claim to be allocated"
            )
            run.pending = wait_pending(ctx.history(ns), run.pods)
            run.early = hold(history)
            run.ready_write = driver.set_conditions("shared", allocation.devices, [driver.attached])
            history.wait(
                lambda h: set(run.pods) <= set(h.bindings()),
                timeout=PREBIND_POLL_S + SCHEDULE_S,
                expected=f"pods {run.pods} to be bound",
            )
        except AssertionError as exc:
            run.stopped = str(exc)
        run.bindings = history.bindings()
        claims = history.events("claim")
        run.claim = claims[-1].obj if claims else {}
    return run


shared = result_fixture("shared", "shared-claim")


@pytest.mark.requirement("SCH-7")
def test_shared_claim_every_pod_waits_then_binds(shared: Shared) -> None:
    assert shared.claim.get("status", {}).get("allocation"), f"the shared claim was not allocated: {shared.stopped}"
    waited = [p for p in shared.pods if shared.pending.get(p)]
    assert waited == shared.pods, f"pods with a BindingConditionsPending event: {waited} of {shared.pods}"
    assert shared.early is None, f"a pod was bound before the binding condition was True: {shared.early}"
    for pod in shared.pods:
        binding = shared.bindings.get(pod)
        assert binding, f"{pod} was not bound: {shared.stopped}"
        assert binding.node == shared.node, f"{pod} bound to {binding.node}, the claim is allocated on {shared.node}"
        assert binding.revision > shared.ready_write, f"{pod} bound before the condition was True"
    reserved = sorted(r["name"] for r in shared.claim["status"].get("reservedFor", []))
    assert reserved == sorted(shared.pods), f"reservedFor {reserved}, expected {shared.pods}"
