"""Binding timeout (SCH-6): a device whose attach hangs keeps the pod unbound until the scheduler gives up.

One pod, pinned to a node without node-local devices, asks for one leased fabric device whose attach the fault
injector makes hang. The scheduler waits in PreBind until the allocation is bindingTimeout old, reports the
timeout, and clears the allocation; then the hang is released and the pod must still bind (recovery). A watch
records the allocations, the pod's conditions and its binding. Needs a cluster whose binding timeout can be set
(1.35+): at the fixed 600 s of 1.34 the scenario would take ten minutes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.manifests import claim_template, pod_with_claim_template
from conformance.implementation.faults import FaultInjector
from conformance.observe.devices import fabric_only_node
from conformance.observe.history import SCHEDULE_S, Allocation, Binding, History
from conformance.suite.scenario import Context, result_fixture, scenario

TIMEOUT_TEXT = "binding timeout"


@dataclass
class TimeoutRun:
    node: str
    timeout_s: float
    allocations: list[Allocation]
    binding: Binding | None
    released: list[dict[str, Any]]  # the hung operations the release let go (proves the attach hung)
    pod_conditions: list[dict[str, Any]] = field(default_factory=list)  # every distinct one the pod showed
    events: list[dict[str, str]] = field(default_factory=list)  # the pod's events

    def where(self, text: str) -> list[str]:
        """Where the pod's events and conditions mention `text`."""
        found = [f"event {e['type']} {e['reason']}" for e in self.events if text in e["message"]]
        found += [
            f"condition {c['type']}={c['status']} ({c['reason']})"
            for c in self.pod_conditions
            if text in (c["message"] or "")
        ]
        return found


def _allocated_at(allocation: Allocation) -> float:
    stamp = allocation.allocation.get("allocationTimestamp")
    assert stamp, f"allocation without allocationTimestamp: {allocation.allocation}"
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@scenario(
    "binding-timeout",
    "the attach of the pod's device hangs: the scheduler times out and deallocates; after the release the pod binds",
    ("SCH-6",),
    faults=True,
)
def binding_timeout(ctx: Context) -> TimeoutRun:
    assert ctx.profile.fault_injector is not None  # faults=True: skipped without one
    info = ctx.cluster.info
    if not info.binding_timeout_configurable:
        pytest.skip(
            f"Kubernetes {info.version} fixes the binding timeout at {info.binding_timeout_s}s: too long to wait"
        )
    node = fabric_only_node(ctx.pool, info.nodes)
    if node is None:
        pytest.skip(f"no node without node-local {ctx.profile.driver} devices is reached by a fabric device")
    lease = ctx.lease(1, "fabric", node)
    ns = ctx.namespace()
    timeout = float(info.binding_timeout_s)
    url = ctx.implementation.resolve(ctx.profile.fault_injector.url)
    with History(ctx.cluster, ns, ctx.objects.run_id) as history, FaultInjector(url, frozenset(lease.identities)) as f:
        f.arm("hang", lease.identities[0])
        ctx.objects.create(claim_template("gpu", ctx.device_class(lease)), ns)
        pod = pod_with_claim_template("app", "gpu")
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        ctx.objects.create(pod, ns)
        history.wait(lambda h: h.allocations(), timeout=SCHEDULE_S, expected="the claim to be allocated")
        history.wait(
            lambda h: h.allocations()[0].cleared_revision,
            timeout=timeout + SCHEDULE_S,
            expected=f"the scheduler to clear the allocation after the binding timeout ({timeout:g}s)",
        )
        released = f.release(lease.identities[0])
        run = TimeoutRun(node, timeout, [], None, released)
        history.wait(
            lambda h: h.binding(),
            timeout=ctx.profile.promises.attach_s + SCHEDULE_S,
            expected="the pod to be bound once the hung attach was released",
        )
        run.allocations, run.binding, run.pod_conditions = (
            history.allocations(),
            history.binding(),
            history.pod_conditions(),
        )
    events = ctx.cluster.core.list_namespaced_event(ns, field_selector="involvedObject.name=app").items
    run.events = [{"type": e.type, "reason": e.reason, "message": e.message or ""} for e in events]
    return run


run = result_fixture("run", "binding-timeout")


@pytest.mark.requirement("SCH-6")
def test_timeout_deallocates_and_the_pod_recovers(run: TimeoutRun) -> None:
    assert run.allocations, "the claim was never allocated"
    first = run.allocations[0]
    assert run.released, "the release let no hung attach go: the attach never hung, so nothing timed out"
    assert first.cleared_revision and first.cleared_at, f"the first allocation was not cleared: {first}"
    waited = first.cleared_at - _allocated_at(first)
    assert waited >= run.timeout_s - 1, (
        f"cleared {waited:.1f}s after the allocation, before the {run.timeout_s:g}s timeout"
    )
    assert not run.binding or run.binding.revision > first.cleared_revision, "the pod was bound before the timeout"
    assert run.where(TIMEOUT_TEXT), (
        f"no {TIMEOUT_TEXT!r} in the pod's events {run.events} or conditions {run.pod_conditions}"
    )
    assert run.binding, "the pod was not bound after the hung attach was released"
    assert run.binding.claim_state == "ready", f"the pod was bound while its claim was {run.binding.claim_state}"
    assert run.binding.node == run.allocations[-1].node == run.node, f"bound to {run.binding.node}: {run.allocations}"
