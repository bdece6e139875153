"""Attach failure (IMP-4): the failed device is reported, hidden, and the pod lands on another device. A stack that
declares it never reports failures (promises.reportsFailures: false) fails IMP-4 citing that (declared_failures.py).

One pod, pinned to a node without node-local devices, asks for one of two leased fabric devices that both reach
that node. The fault injector makes the first attach fail: it is armed on both devices (the suite cannot know
which one the scheduler picks first), and the fault of the device not picked is disarmed as soon as the failure
shows, before the scheduler can reallocate. A watch records every allocation of the claim and the pod's binding;
condition names come from the allocation's bindingFailureConditions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.manifests import claim_template, pod_with_claim_template
from conformance.cluster.waits import WaitTimeout
from conformance.implementation.faults import FaultInjector
from conformance.observe import quarantine
from conformance.observe.devices import FAILED
from conformance.observe.quarantine import Quarantine
from conformance.observe.views import SCHEDULE_S, Allocation, Binding, History
from conformance.suite.implementation.declared_failures import NeverReports, judge_declared, never_reports
from conformance.suite.implementation.outcome import bind_timeout
from conformance.suite.scenario import Context, result_fixture, scenario

REASON = "ConformanceInjectedFailure"


@dataclass
class FailureRun:
    node: str
    leased: list[str]
    allocations: list[Allocation] = field(default_factory=list)
    identities: dict[tuple[str, str], str] = field(default_factory=dict)  # (pool, device) -> physical identity
    binding: Binding | None = None
    failed_identity: str | None = None
    free_after_failure: dict[str, list[str]] = field(default_factory=dict)  # moment -> free copies of failed device
    stopped: str = ""  # the wait that timed out, if one did: the observation ends there
    quarantine: Quarantine | None = None
    came_back: list[str] = field(default_factory=list)  # how the failed device came back within its quarantine
    meanings: dict[str, str] = field(default_factory=dict)  # failure condition type -> reschedule | failure

    def identity(self, allocation: Allocation) -> set[str]:
        return {self.identities.get(d, f"unknown {d}") for d in allocation.devices}


FAIL_ATTEMPTS = 3


@scenario(
    "attach-failure",
    "the first attach of the pod's device fails; the claim is reallocated to another device and the pod binds",
    ("IMP-4",),
    capabilities=("attachFailureReporting",),
    faults=True,
    failure_reporting=True,
)
def attach_failure(ctx: Context) -> FailureRun | NeverReports:
    if declared := never_reports(ctx.profile, "IMP-4", "attach"):
        return declared  # judged on the declaration: nothing to cause
    assert ctx.profile.fault_injector is not None  # faults=True: skipped without one
    nodes = ctx.remote_nodes(2)  # owed: waited for up to the promise, else the scenario fails with the cause
    # Count-based entries: the device an attach will use is not known in advance, so the fault selects the attaches
    # to the scenario's node, which it has to itself meanwhile; the fault's hits name the device it failed.
    lease = ctx.lease(2, "fabric", nodes if ctx.counted else nodes[0], exclusive=ctx.counted)
    node = lease.node or nodes[0]
    ns = ctx.namespace()
    run = FailureRun(node, lease.identities, meanings=dict(ctx.profile.failure_conditions))
    url = ctx.implementation.resolve(ctx.profile.fault_injector.url)
    scope = (frozenset(lease.identities), frozenset({node}) if ctx.counted else frozenset())
    with ctx.history(ns) as history, FaultInjector(url, *scope) as f:
        message = f"conformance scenario {ctx.scenario.name}: attach refused"
        # count=FAIL_ATTEMPTS: an implementation may retry an attach whose outcome it lost (e.g. the controller
        # restarted meanwhile: IMP-8 runs side by side); the retry must fail too, or no failure would be reported.
        targets = [(None, node)] if ctx.counted else [(ident, None) for ident in lease.identities]
        armed = {
            ident or node: f.arm("fail", ident, count=FAIL_ATTEMPTS, node=node_, reason=REASON, message=message)
            for ident, node_ in targets
        }
        ctx.objects.create(claim_template("gpu", ctx.device_class(lease)), ns)
        pod = pod_with_claim_template("app", "gpu")
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        ctx.objects.create(pod, ns)
        try:
            _follow(ctx, history, f, armed, run)
        except WaitTimeout as exc:  # what was seen up to here still decides the requirements it covers
            run.stopped = str(exc)
        cleared = time.time()  # the fault goes with the injector, right after this
        run.allocations, run.binding = history.allocations(), history.binding()
    run.identities = {d: ctx.identity(*d) or f"unknown {d}" for a in run.allocations for d in a.devices}
    _judge_quarantine(ctx, ns, run, cleared)
    return run


def _judge_quarantine(ctx: Context, ns: str, run: FailureRun, cleared: float) -> None:
    """The failed device from the failure on, at every revision of the record and in every probe answer."""
    failures = [f for a in run.allocations for f in a.failures if run.meanings.get(f["type"], "failure") == "failure"]
    if not failures or not run.failed_identity:
        return  # the test says why
    revision = int(failures[0]["revision"])
    records = ctx.record.select()
    at = next((r.at for r in records if r.kind == "claim" and r.namespace == ns and r.revision == revision), cleared)
    run.quarantine = Quarantine(run.failed_identity, run.node, revision, at, cleared)
    identities = ctx.record.identities()
    attribute = ctx.profile.identity_attribute
    run.came_back = quarantine.judge(
        records, ctx.record.samples(), run.quarantine, ctx.profile.driver, attribute, identities
    )


def _follow(ctx: Context, history: History, faults: FaultInjector, armed: dict[str, str], run: FailureRun) -> None:
    attach_s = ctx.profile.promises.attach_s
    failed = history.wait(
        lambda h: next((a for a in h.allocations() if _failures(a, ctx)), None),
        timeout=SCHEDULE_S + attach_s,
        expected="a failure condition (one of the allocation's bindingFailureConditions meaning failure) True",
    )
    # The failed device's identity from the lease (or the slice that published the allocated copy), not from the
    # slices after the failure: a stack may remove a failed device from its slice, one of the ways the KEP names.
    # A count entry has none: the fault's record names the device the attach used.
    run.failed_identity = ctx.identity(*failed.devices[0])
    if run.failed_identity is None and run.node in armed:
        hits = faults.hits(armed[run.node])
        run.failed_identity = hits[0]["device"] if hits else None
        faults.disarm(armed[run.node])  # the next attach, of another device, must go through
    if run.failed_identity:
        ctx.pool.note(run.failed_identity, FAILED)  # a later lease may take it on purpose once offered again
    # Only the first attach may fail: the other device's fault goes before the scheduler can pick that device.
    for ident, fault_id in armed.items():
        if ident != run.node and ident != run.failed_identity and faults.disarm(fault_id) is None:
            raise AssertionError(
                f"the fault on {ident} was used before the suite could disarm it: {history.describe()}"
            )
    moments = (
        ("deallocated", lambda h: h.allocations()[0].cleared_revision, SCHEDULE_S),
        ("reallocated", lambda h: len(h.allocations()) > 1, SCHEDULE_S),
    )
    for moment, done, timeout in moments:
        history.wait(done, timeout=timeout, expected=f"the claim to be {moment} after the failure")
        assert ctx.invariants is not None, "the free entries are read from the session's invariant watcher"
        run.free_after_failure[moment] = ctx.invariants.free_entries(run.failed_identity or "")
    history.wait(lambda h: h.binding(), timeout=bind_timeout(ctx.profile), expected="the pod to be bound")


run = result_fixture("run", "attach-failure")


def _failures(allocation: Allocation, ctx: Context) -> list[dict[str, Any]]:
    """The failure conditions True on an allocation that mean failure (one declared `reschedule` is the happy path
    of reschedule-to-local, not the reported attach failure)."""
    return [f for f in allocation.failures if ctx.profile.meaning(f["type"]) == "failure"]


def _failure(run: FailureRun) -> tuple[Allocation, dict[str, Any]]:
    failed = [
        (a, f) for a in run.allocations for f in a.failures if run.meanings.get(f["type"], "failure") == "failure"
    ]
    assert failed, f"no allocation showed a failure condition True: {run.allocations}\n{run.stopped}"
    return failed[0]


@pytest.mark.requirement("IMP-4")
def test_attach_failure_is_reported_and_the_device_not_offered_again(run: FailureRun) -> None:
    judge_declared(run)
    failed, condition = _failure(run)
    assert condition.get("reason") and condition.get("message"), (
        f"failure condition without reason/message: {condition}"
    )
    assert run.failed_identity, f"the failed device {failed.devices} is not a leased device nor ever published"
    # Every revision and probe answer of the quarantine first; the moments the scenario chose say less.
    assert run.quarantine is not None, f"the quarantine of {run.failed_identity} could not be placed: {run.stopped}"
    assert not run.came_back, f"{run.quarantine}; the device came back:\n" + "\n".join(run.came_back)
    for moment, free in run.free_after_failure.items():
        assert not free, f"the failed device {run.failed_identity} was offered free when the claim was {moment}: {free}"
    picked_again = [
        a.devices for a in run.allocations if a.revision > failed.revision and run.failed_identity in run.identity(a)
    ]
    assert not picked_again, f"the failed device {run.failed_identity} was allocated again: {picked_again}"
