"""SCH-1: the scheduler prefers a node-local device over a fabric device that needs binding conditions.

The suite's driver publishes, for one node, a node-local pool and a fabric pool reaching the same node, each with
one device the claim matches. The fabric pool's name and device sort first, so a scheduler that took the first
pool or device it saw would pick the fabric one; the KEP says pools with binding conditions are tried last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from conformance.observe.slices import allocation_results
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.cluster.owned import pending_events, start
from conformance.suite.scenario import ClusterContext, result_fixture, scenario


@dataclass
class Preference:
    node: str
    local: list[str]
    results: list[dict[str, Any]]
    bound_to: str | None
    pending_events: int


def _allocated(history: History) -> list[dict[str, Any]]:
    return [e.obj for e in history.events("claim") if allocation_results(e.obj)]


@scenario(
    "node-local-preference",
    "a claim matching a node-local device and a fabric device on the same node gets the node-local one",
    ("SCH-1",),
    implementation=False,
)
def node_local_preference(ctx: ClusterContext) -> Preference:
    driver, nodes = start(ctx)
    node = nodes[0]
    local = driver.local_pool(node, pool="z-local")
    driver.fabric_pool([node], pool="a-fabric")
    driver.pod("app", driver.claim_template(), node)
    ns = driver.namespace
    with ctx.history(ns) as history:
        # The pod's and the claim's watch streams are separate: the binding can arrive before the allocation does.
        history.wait(
            lambda h: h.binding() and _allocated(h),
            timeout=SCHEDULE_S,
            expected="the pod to be bound and its claim seen allocated",
        )
        claim = _allocated(history)[-1]
        binding = history.binding()
    waited = pending_events(ctx.history(ns)).get("app", 0)
    return Preference(node, local, allocation_results(claim), binding.node if binding else None, waited)


preference = result_fixture("preference", "node-local-preference")


@pytest.mark.requirement("SCH-1")
def test_node_local_device_is_preferred(preference: Preference) -> None:
    assert len(preference.results) == 1, preference.results
    result = preference.results[0]
    assert result["device"] in preference.local and not result.get("bindingConditions"), (
        f"allocated {result['pool']}/{result['device']} (binding conditions {result.get('bindingConditions')}) "
        f"although the node-local device {preference.local} on the same node matched"
    )
    assert preference.bound_to == preference.node, f"bound to {preference.bound_to}, expected {preference.node}"
    assert not preference.pending_events, (
        f"a node-local allocation must not wait in PreBind: events {preference.pending_events}"
    )
