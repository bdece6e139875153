"""SCH-9 provoked: more pods than devices, binding conditions never written, so every allocation times out in
PreBind and the waiting pods take the devices in turn. A device must never be allocated to a waiting pod's claim
before the timed-out claim's allocation is cleared in the API.

The one known way kube-scheduler breaks SCH-9 (1.37, docs/upstream/double-allocation-after-binding-timeout.md):
after a PreBind timeout, Unreserve restores the claim in the scheduler's assume cache to the informer's copy from
before the allocation; for the moment until the informer delivers the claim's next write the device looks free,
and a waiting pod is allocated it while the API still shows the timed-out claim holding it. That needs no load:
DEVICES devices on one node, PODS pods, nothing ever written on the claims. The scenario watches `rounds` rounds
(a round: every device's allocation timed out once; `--double-allocation-rounds`, default 2, about 2.5 binding
timeouts) and reports how many of the timeouts were followed by a double allocation and how wide each was, in etcd
revisions and milliseconds. On a correct cluster it passes having watched the timeouts; with the default 20 s
timeout it takes about 55 s, beside the suite's longer scenarios, so it runs in every run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.defects import PROPERTY
from conformance.cluster.waits import WaitTimeout
from conformance.observe.allocations import DoubleAllocation, judge
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.cluster.owned import PREBIND_POLL_S, start_timed
from conformance.suite.known import Explained, describe, explain
from conformance.suite.scenario import ClusterContext, result_fixture, scenario

DEVICES = 2
PODS = 5
DEFAULT_ROUNDS = 2
TIMEOUT_SLACK_S = 1.0  # an allocation cleared this much before the timeout (as delivered) still counts as timed out


@dataclass
class Overlaps:
    node: str
    timeout_s: float
    rounds: int
    seconds: float = 0.0
    allocations: int = 0
    timeouts: int = 0  # allocations cleared at least the binding timeout after they were made
    doubles: list[DoubleAllocation] = field(default_factory=list)
    explained: Explained = field(default_factory=lambda: Explained(None))
    stopped: str = ""

    def summary(self) -> str:
        ended = [d for d in self.doubles if not math.isinf(d.revisions)]
        widths = [f"{int(d.revisions)} revisions / {d.seconds * 1000:.0f} ms" for d in ended]
        return (
            f"{len(self.doubles)} double allocations in {self.timeouts} binding timeouts ({self.allocations} "
            f"allocations, {PODS} pods, {DEVICES} devices on {self.node}, bindingTimeout {self.timeout_s:g}s, watched "
            f"{self.seconds:.0f}s)" + (f"; overlaps {', '.join(widths)}" if widths else "")
        )


def timed_out(history: History, timeout_s: float) -> tuple[int, int]:
    """(allocations made, allocations cleared at least the binding timeout after they were made) in the namespace."""
    claims = {e.name for e in history.events("claim")}
    made = [a for c in claims for a in history.allocations(c)]
    late = [a for a in made if a.cleared_at is not None and a.cleared_at - a.at >= timeout_s - TIMEOUT_SLACK_S]
    return len(made), len(late)


@scenario(
    "double-allocation",
    f"{PODS} pods race for {DEVICES} devices whose binding conditions are never written: after each binding timeout "
    "no device is allocated to a waiting claim before the timed-out claim is cleared",
    ("SCH-9",),
    implementation=False,
)
def double_allocation(ctx: ClusterContext) -> Overlaps:
    driver, nodes, timeout_s = start_timed(ctx)
    rounds = int(ctx.options.get("double_allocation_rounds", DEFAULT_ROUNDS))
    run = Overlaps(nodes[0], timeout_s, rounds)
    driver.fabric_pool([run.node], count=DEVICES)
    template = driver.claim_template()
    for i in range(PODS):
        driver.pod(f"app-{i}", template, run.node)
    ns = driver.namespace
    wanted = rounds * DEVICES
    # Each round: the timeout, the PreBind poll that notices it, the next cycles (deallocation, allocation).
    deadline = rounds * (run.timeout_s + PREBIND_POLL_S + 10) + SCHEDULE_S
    begun = time.time()
    with ctx.history(ns) as history:
        try:
            history.wait(
                lambda h: timed_out(h, run.timeout_s)[1] >= wanted,
                timeout=deadline,
                expected=f"{wanted} allocations to time out ({rounds} rounds of {DEVICES} devices)",
            )
        except WaitTimeout as exc:
            run.stopped = str(exc).splitlines()[0]
        run.allocations, run.timeouts = timed_out(history, run.timeout_s)
    records = ctx.record.select(("claim",), namespace=ns)
    run.seconds = time.time() - begun
    run.doubles = judge(records).doubles
    run.explained = explain(run.doubles, records, ctx.cluster.info)
    for d in run.doubles:
        if not math.isinf(d.revisions):
            ctx.measure("double_allocation_overlap_revisions", d.revisions)
            ctx.measure("double_allocation_overlap_ms", d.seconds * 1000)
    ctx.say(run.summary())
    return run


run = result_fixture("run", "double-allocation")


@pytest.mark.requirement("SCH-9")
def test_no_device_allocated_again_before_a_timed_out_claim_is_cleared(run: Overlaps, record_property: Any) -> None:
    record_property("binding_timeouts", run.timeouts)
    record_property("double_allocations", len(run.doubles))
    if run.doubles:
        if run.explained.defect is not None:
            record_property(PROPERTY, run.explained.defect.id)
        pytest.fail(f"{run.summary()}\n{describe(run.doubles, run.explained)}", pytrace=False)
    if not run.timeouts:
        pytest.skip(f"no allocation timed out, so nothing provoked a double allocation: {run.stopped or run.summary()}")
