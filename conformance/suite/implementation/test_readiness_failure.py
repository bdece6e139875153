"""RDY-5: a readying failure (node-local readiness gate). The fault injector makes the next readying of both devices a
claim may get fail; once the first failure condition shows, the other device's fault is disarmed. The implementation
must set a failure condition True with a reason and a message on the failed device, keep that device from being picked
again (out of its slice, tainted, or another way), and the claim must be reallocated and its pod bind on a device that
is ready (the readiness probe, where the profile has one).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import claim_template, pod_with_claim_template
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.faults import FaultInjector
from conformance.observe.devices import FAILED
from conformance.observe.readiness import ReadinessSampler
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.slices import device_identity, driver_slices
from conformance.observe.views import SCHEDULE_S
from conformance.suite.implementation.declared_failures import NeverReports, judge_declared, never_reports
from conformance.suite.implementation.readiness import Gate, gated_node, judge, require_model, sampler, wait_bound
from conformance.suite.scenario import Context, result_fixture, scenario

QUARANTINE_WAIT_S = 90.0
REASON, MESSAGE = "FPGAProgrammingFailed", "injected by the conformance suite: the bitstream did not load"


@dataclass
class Failure:
    gate: Gate
    failed: dict[str, object] = field(default_factory=dict)  # the first failure condition seen True, with its device
    failed_identity: str | None = None
    later: list[str] = field(default_factory=list)  # allocations of the failed device after its failure


@scenario(
    "readiness-failure",
    "the readying of a node-local device fails: failure condition, reallocation onto another device, the failed one "
    "not picked again",
    ("RDY-5",),
    faults=True,
    remote=False,
    failure_reporting=True,
)
def readiness_failure(ctx: Context) -> Failure | NeverReports:
    require_model(ctx)
    if declared := never_reports(ctx.profile, "RDY-5", "readying"):
        return declared  # judged on the declaration: nothing to cause
    assert ctx.profile.fault_injector is not None  # faults=True: skipped without one
    node, lease = gated_node(ctx, 2)
    ns = ctx.namespace()
    ctx.objects.create(claim_template("gpu", ctx.device_class(lease)), ns)
    url = ctx.implementation.resolve(ctx.profile.fault_injector.url)
    timeout = ctx.profile.promises.attach_s + 2 * 5.0 + SCHEDULE_S
    with FaultInjector(url, frozenset(lease.identities)) as injector, sampler(ctx, lease) as probe:
        _unprepared(ctx, probe, lease.identities)
        # count: a stack may retry a readying before it reports the failure
        faults = {d: injector.arm("fail", d, count=5, reason=REASON, message=MESSAGE) for d in lease.identities}
        with ctx.history(ns) as history:
            ctx.objects.create(pod_with_claim_template("app", "gpu"), ns)
            _disarm_the_other(injector, faults, timeout)  # the reallocation's readying must succeed
            first = history.wait(
                lambda h: next((f for a in h.allocations() for f in a.failures), None),
                timeout=timeout,
                expected="a failure condition True on the device whose readying failed",
            )
            failed_identity = ctx.identity(*first["device"])
            wait_bound(ctx, history, extra_s=timeout)
            gate = judge(ctx, history, node, probe)
        _offered_again(ctx, failed_identity)
    if failed_identity:
        ctx.pool.note(failed_identity, FAILED)  # a later lease may take it on purpose once offered again
    seen = Failure(gate, first, failed_identity)
    failed_at = first["device"]
    for a in gate.allocations:
        if a.revision > int(first["revision"]) and failed_at in a.devices:
            seen.later.append(f"allocated again at revision {a.revision}: {a.devices}")
    if gate.ready_to_bind is not None:
        ctx.measure("ready_to_bind_after_failure_seconds", gate.ready_to_bind)
    return seen


def _unprepared(ctx: Context, probe: ReadinessSampler | None, devices: list[str]) -> None:
    """The failure is staged on a readying, so the leased devices must be readied afresh: one still ready from its
    last use (a stack may keep a device prepared a while after its claim went: the reference for 2 s, for reuse) is
    given to the claim with no readying, and no fault can hit (a run under load bound the claim at once and waited
    60 s for a refusal). Waited for by the readiness probe up to detachSeconds, the stack's promise to let a released
    device go, and a scheduling step; without a probe the readying is assumed to come."""
    if probe is None:
        return
    timeout = ctx.profile.promises.detach_s + SCHEDULE_S

    def still_ready() -> list[str]:
        return [f"{d} on {s.node}" for d in devices if (s := probe.latest(d)) and s.ready]

    try:
        wait_for(still_ready, lambda ready: not ready, timeout=timeout, expected="the leased devices not ready")
    except WaitTimeout as exc:
        raise AssertionError(
            f"no readying to make fail: the leased devices {still_ready()} were still ready (the readiness probe) "
            f"{timeout:g}s after the scenario leased them, past detachSeconds ({ctx.profile.promises.detach_s:g}s) for "
            "a released device to be let go"
        ) from exc


def _disarm_the_other(injector: FaultInjector, faults: dict[str, str], timeout: float) -> None:
    """Once the first readying is refused (the injector's record, before the stack has even read the failure), the
    other device's fault is disarmed: the stack's report and the scheduler's reallocation come later. A fault already
    used (both readyings refused) is said as the staging's, never left to read as the stack picking a failed device."""
    expected = f"the readying of one of {sorted(faults)} (the fault injector to refuse it)"
    hit = injector.first_hit(faults, timeout=timeout, expected=expected, interval=PROBE_PERIOD_S)
    for device, fault in faults.items():
        if device != hit and ((gone := injector.disarm(fault)) is None or gone.get("hits")):
            raise AssertionError(
                f"the suite could not stage one readying failure: the readying of {device} was refused too before the "
                f"suite disarmed its fault (the first refused was {hit}'s); not the stack's doing"
            )


def _offered_again(ctx: Context, identity: str | None) -> None:
    """Hold the lease until the failed device is published again (its quarantine over), so the next scenario that
    leases it is not left waiting for a device the scheduler cannot pick; not a requirement: bounded, never fails."""
    if identity is None:
        return
    attribute, driver = ctx.profile.identity_attribute, ctx.profile.driver

    def published() -> bool:
        slices = driver_slices(ctx.cluster, driver)
        return any(
            device_identity(d, attribute, driver) == identity for s in slices for d in s["spec"].get("devices") or []
        )

    with contextlib.suppress(WaitTimeout):
        wait_for(published, bool, timeout=QUARANTINE_WAIT_S, expected=f"{identity} published again")


failure = result_fixture("failure", "readiness-failure")


@pytest.mark.requirement("RDY-5")
def test_failure_condition_with_reason_then_reallocation_not_onto_the_failed_device(failure: Failure) -> None:
    judge_declared(failure)
    gate, cond = failure.gate, failure.failed
    assert cond, f"no failure condition was True:\n  {gate.describe()}"
    assert cond.get("reason") and cond.get("message"), f"the failure condition has no reason or message: {cond}"
    assert len(gate.allocations) >= 2, f"the claim was not allocated again after the failure:\n  {gate.describe()}"
    assert not failure.later, (
        f"the failed device {cond['device']} was picked again: " + "; ".join(failure.later) + f"\n  {gate.describe()}"
    )
    assert gate.binding is not None, f"the pod never bound after the reallocation:\n  {gate.describe()}"
    assert not gate.unready_binding, "\n".join(gate.unready_binding) + f"\n  {gate.describe()}"
    assert not gate.early, "\n".join(gate.early) + f"\n  {gate.describe()}"
