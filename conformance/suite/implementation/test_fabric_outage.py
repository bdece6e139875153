"""IMP-15: the fabric manager out of reach for a while.

The fault injector's `unreachable` mode refuses every attach and detach of the scenario's device (count-based: to the
scenario's own node) at once, doing nothing, as long as it is armed: the stack's fabric manager is out of reach for
them. The pod is created; once the stack has tried the attach (the fault's hits) the outage lasts OUTAGE_S more. No
binding condition may say the device is attached before the fabric did; after the outage everything converges: the
pod ends bound where the fabric attached its device (a binding timeout on the way is accepted only where the outage
alone reaches the bindingTimeout), and once it is gone the device is detached and offered again. Two claim shapes
(shape.py): one device, and `devicesPerClaim` devices over two requests (the outage refuses the operations of every
device of the claim), each device's conditions compared with THAT device's attach, each device let go on its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import wait_for
from conformance.implementation.faults import FaultInjector
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.implementation.settle import LetGo, let_go, unattached_until, unbacked_conditions
from conformance.suite.implementation.shape import Shape, shaped_claim, shaped_fixture, shaped_scenario
from conformance.suite.scenario import Context

OUTAGE_S = 6.0  # how long the fabric stays out of reach once the stack has met it


@dataclass
class Outage:
    node: str
    refused: int = 0  # attaches and detaches the fabric refused during the outage
    attached_during: list[str] = field(default_factory=list)  # probe answers listing the device during the outage
    unbacked: list[str] = field(default_factory=list)
    timeout_expected: bool = False
    outcome: Outcome | None = None
    let_go: LetGo | None = None


@shaped_scenario(
    "fabric-unreachable",
    "the fabric manager is out of reach for the pod's attach for a while: no condition claims an attach, all converge",
    ("IMP-15",),
    probe=True,
    faults=True,
)
def fabric_unreachable(ctx: Context, shape: Shape) -> Outage:
    probe = ctx.probe
    injector = ctx.profile.fault_injector
    assert probe is not None and injector is not None  # probe=True, faults=True
    claimed = shaped_claim(ctx, shape, exclusive=ctx.counted)
    node, ns, leased = claimed.node, claimed.ns, claimed.identities
    seen = Outage(node)
    faults = FaultInjector(
        ctx.implementation.resolve(injector.url),
        frozenset(leased),
        frozenset({node}) if ctx.counted else frozenset(),
    )
    # Count-based: every operation on the scenario's own node; identified: every device of the claim.
    targets: list[dict[str, Any]] = [{"node": node}] if ctx.counted else [{"device": d} for d in leased]
    began = time.time()
    with faults, ctx.history(ns) as history:
        armed = [faults.arm("unreachable", count=1_000_000, **target) for target in targets]
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        hits = wait_for(
            lambda: [h for fault in armed for h in faults.hits(fault)],
            bool,
            timeout=bind_timeout(ctx.profile),
            expected=f"the stack to try the attach to {node} (the unreachable fault to refuse it)",
            interval=PROBE_PERIOD_S,
            max_interval=4 * PROBE_PERIOD_S,
        )
        met = time.time()
        probe.after(met + OUTAGE_S, timeout=OUTAGE_S + 10)  # the outage goes on, observed
        ending = time.time()  # the outage ends with the first fault disarmed (a claim of several: one per device)
        for fault in armed:
            faults.disarm(fault)
        back = time.time()
        # The refusals may also hit the detach of a device left attached on the node before (count-based: faults by
        # node): only devices the fabric did not list when the scenario began are the pod's.
        first = probe.samples(began)
        listed = set(first[0].states) if first else set()
        devices = ({str(h["device"]) for h in hits} | set(leased)) - listed
        seen.refused = sum(len(faults.hits(fault)) for fault in armed)
        seen.attached_during = [
            f"{s.sent:.3f} {d}: {s.states[d]}"
            for s in probe.samples(began)
            if s.sent < ending
            for d in devices
            if d in s.states
        ]
        needed = (back - met) + ctx.profile.promises.attach_s + PREBIND_POLL_S
        seen.timeout_expected = needed >= float(ctx.cluster.info.binding_timeout_s)
        extra = float(ctx.cluster.info.binding_timeout_s) + (claimed.count - 1) * ctx.profile.promises.attach_s
        seen.outcome = follow(ctx, history, node, bind_timeout(ctx.profile) + extra)
        used = sorted({i for i in seen.outcome.final_identities() if i})
        seen.unbacked = unbacked_conditions(ctx, history, {d: unattached_until(probe, d, node, began) for d in used})
    ctx.cluster.core.delete_namespaced_pod("app", ns, grace_period_seconds=0)
    seen.let_go = let_go(ctx, used, claimed.lease, time.monotonic(), ctx.profile.promises.detach_s)
    return seen


outage = shaped_fixture("outage", "fabric-unreachable")


@pytest.mark.requirement("IMP-15")
def test_no_condition_claims_an_attach_while_the_fabric_is_out_of_reach(outage: Outage) -> None:
    assert not outage.attached_during, f"the fabric was out of reach, yet it listed: {outage.attached_during[:5]}"
    assert not outage.unbacked, (
        f"binding conditions True before the fabric said the device was attached ({outage.refused} operations "
        "refused during the outage):\n  " + "\n  ".join(outage.unbacked)
    )


@pytest.mark.requirement("IMP-15")
def test_everything_converges_once_the_fabric_is_back(outage: Outage) -> None:
    assert outage.outcome is not None
    problems = outage.outcome.binding_problems(timeouts=outage.timeout_expected)
    assert not problems, "\n".join(problems) + f"\n  {outage.outcome.describe()}"
    assert outage.let_go is not None
    problem = outage.let_go.problem()
    assert not problem, f"after the pod was deleted: {problem}"
