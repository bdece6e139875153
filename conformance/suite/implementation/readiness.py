"""What the node-local readiness-gate scenarios (RDY-*, bindingModel node-local) share: the gate on the model, a node
with enough of the implementation's gated devices, the readiness probe, and the judgement of one claim's path from
allocation to binding against what the probe says.

Node-local devices with binding conditions read as devices "with conditions" reaching one node (observe/devices.py),
so a scenario leases them like any other, on one node.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.versions import PREBIND_POLL_S
from conformance.implementation.profile import Profile
from conformance.observe.devices import Lease
from conformance.observe.readiness import ReadinessSampler
from conformance.observe.views import SCHEDULE_S, Allocation, Binding, History
from conformance.suite.implementation.context import Context

NODE_LOCAL = "node-local"


def model_gap(profile: Profile) -> str | None:
    """Why a profile's implementation has no readiness gate to judge (the RDY-* scenarios skip with it), or None."""
    if profile.binding_model != NODE_LOCAL:
        return f"bindingModel {profile.binding_model}: the node-local readiness gate (RDY-*) is judged for node-local"
    return None


def require_model(ctx: Context) -> None:
    if reason := model_gap(ctx.profile):
        pytest.skip(reason)


def probe_gap(profile: Profile) -> str | None:
    if profile.readiness_probe is None:
        return "the profile declares no readinessProbe: whether a device is ready is judged on what it says"
    return None


def gated_node(
    ctx: Context, count: int, exclude: tuple[str, ...] = (), prefer: tuple[str, ...] = ()
) -> tuple[str, Lease]:
    """A node with `count` of the implementation's gated devices, and a lease of them (the node with the most first,
    so scenarios side by side spread; `prefer`: devices leased on purpose, as Context.lease)."""
    ctx.refresh()
    nodes = [n.name for n in ctx.nodes() if n.name not in exclude]
    room = {n: ctx.pool.count("fabric", n) for n in nodes}
    found = ctx.owed(
        f"a node with {count} node-local {ctx.profile.driver} devices with binding conditions",
        lambda: (
            ctx.refresh() or sorted((n for n in nodes if ctx.pool.count("fabric", n) >= count), key=lambda n: -room[n])
        ),
        lambda: f"gated devices per node: {room}",
    )
    node = found[0]
    return node, ctx.lease(count, "fabric", node, prefer=prefer)


def sampler(ctx: Context, lease: Lease) -> ReadinessSampler | nullcontext[None]:
    """The readiness probe sampled for the leased devices, or nothing where the profile declares no probe."""
    if ctx.profile.readiness_probe is None:
        return nullcontext(None)
    url = ctx.implementation.resolve(ctx.profile.readiness_probe.url)
    return ReadinessSampler(url, frozenset(lease.identities))


def wait_bound(ctx: Context, history: History, pods: int = 1, extra_s: float = 0.0) -> dict[str, Binding]:
    """Every pod of the namespace bound, within the promise (readying), two PreBind polls and a scheduling step."""
    timeout = ctx.profile.promises.attach_s + 2 * PREBIND_POLL_S + SCHEDULE_S + extra_s

    def bound(h: History) -> dict[str, Binding] | None:
        found = h.bindings()
        return found if len(found) >= pods else None

    return history.wait(
        bound,
        timeout=timeout,
        expected=f"{pods} pod(s) bound after their devices were readied (promises.attachSeconds + PreBind polls)",
    )


@dataclass
class Gate:
    """One claim's path through a readiness gate, as the record and the readiness probe showed it."""

    node: str
    allocations: list[Allocation]
    binding: Binding | None
    identity: dict[tuple[str, str], str | None]  # (pool, device) -> physical identity
    slices: list[dict[str, Any]] = field(default_factory=list)  # the driver's slices when the scenario ended
    early: list[str] = field(default_factory=list)  # RDY-3: a binding condition True before its device was ready
    unready_binding: list[str] = field(default_factory=list)  # RDY-4
    judged: int = 0  # binding conditions judged against the probe
    probed: bool = False
    ready_to_bind: float | None = None  # seconds from the first allocation to the binding
    lag: str | None = None  # the claim stream had not delivered up to the binding when judged (History.catch_up)

    def describe(self) -> str:
        lines = [f"node {self.node}"]
        for a in self.allocations:
            lines.append(
                f"allocation at {a.at:.3f} (revision {a.revision}): {a.devices} on {a.node}; True at "
                f"{ {f'{k[1]}:{k[2]}': round(v[1], 3) for k, v in a.true_at.items()} }; failures "
                f"{[(f['type'], f.get('reason')) for f in a.failures]}"
            )
        lines.append(f"binding: {self.binding}")
        if self.lag:
            lines.append(f"judged without the claim stream caught up with the binding: {self.lag}")
        return "\n  ".join(lines)


def judge(
    ctx: Context,
    history: History,
    node: str,
    probe: ReadinessSampler | None,
    claim: str | None = None,
    pod: str | None = None,
) -> Gate:
    """Judge one claim (default: the namespace's one) and its pod (default: the first bound) against the probe: each
    binding condition True only once its device is ready on the allocation's node; the binding only once every device
    is ready there. Judged once the claim stream has delivered up to the binding (History.catch_up)."""
    binding, lag = _binding(history, pod), None
    if binding is not None:
        lag = history.catch_up(binding, f"the binding of pod {pod or '(the first)'} on {binding.node}")
        binding = _binding(history, pod)  # its claim state as of its revision, now that the claims are in
    allocations = history.allocations(claim)
    identity = {d: ctx.identity(*d) for a in allocations for d in a.devices}
    gate = Gate(node, allocations, binding, identity, probed=probe is not None, lag=lag)
    if binding is not None and allocations:
        gate.ready_to_bind = round(binding.at - allocations[0].at, 3)
    if probe is None:
        return gate
    for a in allocations:
        for r in a.results:
            wanted = r.get("bindingConditions") or []
            device = identity.get((r["pool"], r["device"]))
            for condition in wanted:
                seen = a.true_at.get((r["pool"], r["device"], condition))
                if seen is None:
                    continue
                gate.judged += 1
                if device is None:
                    gate.early.append(f"{r['pool']}/{r['device']}: no {ctx.profile.identity_attribute}: cannot ask")
                    continue
                what = f"{condition}=True on {r['pool']}/{r['device']} (revision {seen[0]})"
                if problem := probe.ready_problem(device, a.node, seen[1], what):
                    gate.early.append(problem)
    if binding is not None:
        current = [
            a for a in allocations if a.revision <= binding.revision and (a.cleared_revision or 1e18) > binding.revision
        ]
        if not current:
            said = f"the pod bound at revision {binding.revision} with no allocation of its claim"
            gate.unready_binding.append(f"{said} ({lag})" if lag else said)
        for a in current[-1:]:
            if a.node is not None and a.node != binding.node:
                gate.unready_binding.append(f"the pod bound on {binding.node}, the allocation pins {a.node}")
            for pool, name in a.devices:
                device = identity.get((pool, name))
                if device is None:
                    gate.unready_binding.append(f"{pool}/{name}: no identity, cannot ask the probe")
                    continue
                what = f"the pod bound on {binding.node} (revision {binding.revision}) with {pool}/{name}"
                if problem := probe.ready_problem(device, binding.node, binding.at, what):
                    gate.unready_binding.append(problem)
    return gate


def _binding(history: History, pod: str | None) -> Binding | None:
    """`pod`'s binding, else the namespace's first."""
    bindings = history.bindings()
    if pod is not None:
        return bindings.get(pod)
    return min(bindings.values(), key=lambda b: b.revision) if bindings else None
