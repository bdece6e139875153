"""SCH-5: a binding failure condition makes the scheduler deallocate the claim and schedule the pod again, not onto
the failed device.

The suite's driver publishes a fabric pool of two devices reaching one node. Once the claim is allocated, the suite
(playing the controller) does what the KEP asks of a controller whose attach failed: it withdraws the failed device
from the pool (a new pool generation) and sets the failure condition True with a reason and message. The claim must
be cleared, allocated again on the other device, and the pod bound only after that device's condition is True.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from conformance.observe.views import SCHEDULE_S, Allocation, Binding
from conformance.suite.cluster.owned import INJECTED_REASON, PREBIND_POLL_S, start
from conformance.suite.scenario import ClusterContext, result_fixture, scenario


@dataclass
class Failure:
    node: str
    allocations: list[Allocation] = field(default_factory=list)
    failed: tuple[str, str] | None = None  # (pool, device) the suite failed
    failure_write: int = 0
    ready_write: int = 0  # revision of the write that set the new device's condition True
    binding: Binding | None = None
    stopped: str = ""


@scenario(
    "failure-reschedule",
    "the controller reports a failed attach: the claim is deallocated and reallocated to the other device",
    ("SCH-5",),
    implementation=False,
)
def failure_reschedule(ctx: ClusterContext) -> Failure:
    driver, nodes = start(ctx)
    node = nodes[0]
    driver.fabric_pool([node], count=2)
    driver.pod("app", driver.claim_template(), node)
    ns = driver.namespace
    run = Failure(node)
    with ctx.history(ns) as history:
        try:
            first = history.wait(
                lambda h: next(iter(h.allocations()), None), timeout=SCHEDULE_S, expected="the claim to be allocated"
            )
            claim = history.events("claim")[-1].name
            run.failed = first.devices[0]
            driver.withdraw(*run.failed)
            run.failure_write = driver.set_conditions(
                claim, [run.failed], [driver.failed], reason=INJECTED_REASON, message="attach refused by the suite"
            )
            second = history.wait(
                lambda h: h.allocations()[1] if len(h.allocations()) > 1 else None,
                timeout=PREBIND_POLL_S + 2 * SCHEDULE_S,
                expected="the claim to be deallocated and allocated again after the failure",
            )
            run.ready_write = driver.set_conditions(claim, second.devices, [driver.attached])
            run.binding = history.wait(
                lambda h: h.binding(), timeout=PREBIND_POLL_S + SCHEDULE_S, expected="the pod to be bound"
            )
        except AssertionError as exc:
            run.stopped = str(exc)
        run.allocations = history.allocations()
    return run


run = result_fixture("run", "failure-reschedule")


@pytest.mark.requirement("SCH-5")
def test_failure_condition_deallocates_and_reschedules_elsewhere(run: Failure) -> None:
    assert run.allocations and run.failed, f"the claim was never allocated: {run.stopped}"
    first = run.allocations[0]
    assert first.failures, f"the failure condition written at revision {run.failure_write} was not seen on the claim"
    assert first.cleared_revision, f"the failed allocation was never cleared: {run.stopped}"
    assert first.cleared_revision > run.failure_write, "cleared before the failure was reported"
    later = run.allocations[1:]
    assert later, f"the claim was not allocated again after the failure: {run.stopped}"
    assert all(run.failed not in a.devices for a in later), (
        f"reallocated onto the failed (and withdrawn) device {run.failed}: {[a.devices for a in later]}"
    )
    assert run.binding, f"the pod was not bound after the reallocation: {run.stopped}"
    assert run.binding.revision > run.ready_write, (
        f"bound at revision {run.binding.revision}, before the new device's condition was set at {run.ready_write}"
    )
    assert run.binding.node == later[-1].node == run.node, (
        f"bound to {run.binding.node}; the new allocation pins {later[-1].node}"
    )
