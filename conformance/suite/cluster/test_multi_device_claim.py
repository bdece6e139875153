"""SCH-8: in a claim with several devices, every device's binding conditions gate the binding.

The suite's driver publishes two fabric devices reaching one node; the claim asks for both. The suite sets the first
device's condition True, watches two PreBind polls (the pod must stay unbound), then sets the second one's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conformance.observe.views import SCHEDULE_S, Allocation, Binding
from conformance.suite.cluster.owned import PREBIND_POLL_S, hold, start, wait_pending
from conformance.suite.scenario import ClusterContext, result_fixture, scenario


@dataclass
class Multi:
    node: str
    allocation: Allocation | None = None
    first_write: int = 0
    early: Binding | None = None
    last_write: int = 0
    binding: Binding | None = None
    stopped: str = ""


@scenario(
    "multi-device-claim",
    "one claim with two fabric devices: the pod binds only once the second device's conditions are True too",
    ("SCH-8",),
    implementation=False,
)
def multi_device_claim(ctx: ClusterContext) -> Multi:
    driver, nodes = start(ctx)
    run = Multi(nodes[0])
    driver.fabric_pool([run.node], count=2)
    driver.pod("app", driver.claim_template(count=2), run.node)
    ns = driver.namespace
    with ctx.history(ns) as history:
        try:
            run.allocation = history.wait(
                lambda h: next(iter(h.allocations()), None), timeout=SCHEDULE_S, expected="the claim to be allocated"
            )
            wait_pending(ctx.history(ns), ["app"])
            claim = history.events("claim")[-1].name
            first, *rest = run.allocation.devices
            run.first_write = driver.set_conditions(claim, [first], [driver.attached])
            run.early = hold(history)
            run.last_write = driver.set_conditions(claim, rest, [driver.attached])
            run.binding = history.wait(
                lambda h: h.binding(), timeout=PREBIND_POLL_S + SCHEDULE_S, expected="the pod to be bound"
            )
        except AssertionError as exc:
            run.stopped = str(exc)
    return run


multi = result_fixture("multi", "multi-device-claim")


@pytest.mark.requirement("SCH-8")
def test_every_device_of_a_claim_gates_binding(multi: Multi) -> None:
    assert multi.allocation, f"the claim was never allocated: {multi.stopped}"
    results = multi.allocation.results
    assert len(results) == 2 and all(r.get("bindingConditions") for r in results), results
    assert multi.early is None, (
        f"bound (revision {multi.early.revision}) while the second device's condition was not True"
    )
    assert multi.binding, f"the pod was not bound once both devices were ready: {multi.stopped}"
    assert multi.binding.revision > multi.last_write, (
        f"bound at revision {multi.binding.revision}, before the second device was ready ({multi.last_write})"
    )
    assert multi.binding.node == multi.node, f"bound to {multi.binding.node}, expected {multi.node}"
