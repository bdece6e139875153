"""IMP-20 a shared claim on the implementation: one ResourceClaim with one fabric device, used by several pods pinned
to one node without node-local devices.

The device is attached once (the fabric attaches one device to the node for the claim, not one per pod), every pod
binds on that node with the device attached there, the first pod's deletion leaves the device attached while the
others still run (every probe answer for HOLD_S after the control plane dropped that pod from the claim's
reservedFor), and once the last pod and the claim are gone the device is let go (detached and offered again) within
detachSeconds.

Per binding model: keep-in-pool keeps the claim's fabric device; reschedule-to-local moves the claim onto the
node-local copy (the scheduler deallocates a shared claim only once no pod holds it: every pod waits); count-based
entries name no device, so the node is the scenario's alone and "one attach" is one device attached to it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import pod_with_claim, resource_claim
from conformance.cluster.waits import wait_for
from conformance.observe.attachments import stamp
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.views import SCHEDULE_S, Binding
from conformance.suite.implementation.outcome import Outcome, bind_timeout, outcome
from conformance.suite.implementation.settle import LetGo, let_go
from conformance.suite.scenario import Context, result_fixture, scenario

PODS = 3
CLAIM = "shared"
HOLD_S = 3.0  # after the first pod is gone, the device must stay attached this long while the others run


@dataclass
class Shared:
    node: str
    outcome: Outcome | None = None
    bindings: dict[str, Binding] = field(default_factory=dict)
    device: str | None = None  # the physical device the pods ended with
    attached: list[str] = field(default_factory=list)  # count-based: devices that arrived on its node meanwhile
    attaches: int = 0  # how often the device went into the fabric's attaching/attached from free
    at_bindings: dict[str, object] = field(default_factory=dict)  # pod -> the probe's word on the device then
    kept: list[str] = field(default_factory=list)  # probe answers in the window that did not say attached there
    window: int = 0  # probe answers judged in the window
    let_go: LetGo | None = None


@scenario(
    "shared-claim-attach",
    f"one claim with a fabric device used by {PODS} pods on one node: one attach, all bind, detached after the last",
    ("IMP-20",),
    capabilities=("sharedClaims",),
    probe=True,
)
def shared_claim(ctx: Context) -> Shared:
    probe = ctx.probe
    assert probe is not None  # probe=True
    nodes = ctx.remote_nodes(1)  # owed: past the promise, fails naming the pools and the labels nodes lack
    # Count-based: the node is the scenario's alone, so what the fabric attaches there is the claim's.
    lease = ctx.lease(1, "fabric", nodes if ctx.counted else nodes[0], exclusive=ctx.counted)
    node = lease.node or nodes[0]
    run = Shared(node)
    ns = ctx.namespace()
    ctx.objects.create(resource_claim(CLAIM, ctx.device_class(lease)), ns)
    started = time.time()
    with ctx.history(ns) as history:
        pods = [f"app-{i}" for i in range(PODS)]
        for pod in pods:
            ctx.objects.create(pod_with_claim(pod, CLAIM, node), ns)
        history.wait(
            lambda h: len(h.bindings()) == PODS or None,
            timeout=bind_timeout(ctx.profile, SCHEDULE_S),
            expected=f"all {PODS} pods of the shared claim bound",
        )
        run.bindings = history.bindings()
        run.outcome = seen = outcome(ctx, history, node)
        run.device = next((i for i in seen.final_identities() if i), None)
        if run.device is None:
            raise AssertionError(f"the shared claim's device has no physical identity:\n  {seen.describe()}")
        for pod, b in run.bindings.items():
            run.at_bindings[pod] = probe.after(b.at).get(run.device)
        samples = probe.samples(started)
        if ctx.counted and samples:  # the node is the scenario's alone: what the fabric attaches there is the claim's
            # Arrivals only: an earlier holder's devices may still be leaving the node when the scenario begins.
            arrived: set[str] = set()
            before = {i for i, (n, _) in samples[0].states.items() if n == node}
            for s in samples[1:]:
                now = {i for i, (n, _) in s.states.items() if n == node}
                arrived |= now - before
                before = now
            run.attached = sorted(arrived)
        previous = None
        for s in samples:
            state = s.states.get(run.device)
            if state is not None and state[0] == node and (previous is None or previous[0] != node):
                run.attaches += 1
            previous = state

        # The first pod goes; the control plane drops it from the claim's reservedFor; the device must stay.
        ctx.cluster.core.delete_namespaced_pod(pods[0], ns, grace_period_seconds=0)
        history.wait(
            lambda h: _dropped(h.latest("claim").get(CLAIM), pods[0]),
            timeout=SCHEDULE_S,
            expected=f"{pods[0]} gone from the claim's reservedFor (the resourceclaim controller)",
        )
        dropped = time.time()
        window = wait_for(
            lambda: [s for s in probe.samples(dropped) if s.received <= dropped + HOLD_S],
            lambda got: bool(probe.samples(dropped + HOLD_S)),
            timeout=HOLD_S + 10 * PROBE_PERIOD_S + SCHEDULE_S,
            expected=f"probe answers for {HOLD_S:g}s after {pods[0]} left the claim",
        )
        run.window = len(window)
        run.kept = [
            f"sent {stamp(s.sent)}: {s.states.get(run.device, 'free')}"
            for s in window
            if s.states.get(run.device) != (node, "attached")
        ]
        for pod in pods[1:]:
            ctx.cluster.core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
        ctx.cluster.resource.delete_namespaced_resource_claim(CLAIM, ns)
        released = time.monotonic()
    run.let_go = let_go(ctx, [run.device], lease, released, ctx.profile.promises.detach_s)
    return run


def _dropped(claim: dict[str, object] | None, pod: str) -> bool:
    if claim is None:
        return False
    reserved = (claim.get("status") or {}).get("reservedFor") or []  # type: ignore[union-attr]
    return bool(reserved) and all(r.get("name") != pod for r in reserved)


shared = result_fixture("shared", "shared-claim-attach")


@pytest.mark.requirement("IMP-20")
def test_one_attach_and_every_pod_binds_on_that_node(shared: Shared) -> None:
    seen = shared.outcome
    assert seen is not None
    wrong = {pod: b.node for pod, b in shared.bindings.items() if b.node != shared.node}
    assert len(shared.bindings) == PODS and not wrong, f"pods bound {shared.bindings}; pinned to {shared.node}"
    problems = seen.binding_problems()
    assert not problems, "\n".join(problems) + f"\n  {seen.describe()}"
    not_there = {p: s for p, s in shared.at_bindings.items() if s != (shared.node, "attached")}
    assert not not_there, f"at the binding of these pods the probe did not say {shared.device} attached: {not_there}"
    assert shared.attaches == 1, f"{shared.device} was attached to {shared.node} {shared.attaches} times for one claim"
    assert not shared.attached or shared.attached == [shared.device], (
        f"the fabric attached {shared.attached} to {shared.node} for one claim of one device"
    )


@pytest.mark.requirement("IMP-20")
def test_the_device_stays_attached_until_the_last_pod_is_gone(shared: Shared) -> None:
    assert shared.window, "no probe answer was judged after the first pod left the claim"
    assert not shared.kept, (
        f"{shared.device} left {shared.node} within {HOLD_S:g}s of the first pod leaving the shared claim, "
        f"while {PODS - 1} pods still used it:\n  " + "\n  ".join(shared.kept)
    )


@pytest.mark.requirement("IMP-20")
def test_the_device_is_let_go_after_the_last_pod(shared: Shared) -> None:
    got = shared.let_go
    assert got is not None and not got.problem(), got.problem() if got else "no release observed"
