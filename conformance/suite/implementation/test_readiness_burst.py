"""RDY-7: a burst on a node-local readiness gate. As many pods as leased devices (spread over the nodes that have them)
are created at once, each with its own claim from one class matching exactly those devices, so the scheduler hands
them out concurrently and the implementation readies them side by side. Every pod must bind, on a device the readiness
probe says is ready on its node (where the profile has one), and no device may be held by two claims at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import pytest

from conformance.cluster.manifests import claim_template, pod_with_claim_template
from conformance.observe.views import History
from conformance.suite.implementation.readiness import Gate, judge, require_model, sampler, wait_bound
from conformance.suite.scenario import Context, result_fixture, scenario

BURST = 8


@dataclass
class Burst:
    pods: int
    bound: int = 0
    gates: dict[str, Gate] = field(default_factory=dict)  # claim -> its path
    twice: list[str] = field(default_factory=list)  # a device held by two claims at once


@scenario(
    "readiness-burst",
    f"{BURST} pods at once, each with its own claim on one class of {BURST} node-local devices: every one binds on a "
    "ready device, none held twice",
    ("RDY-7",),
    remote=False,
)
def readiness_burst(ctx: Context) -> Burst:
    require_model(ctx)
    ctx.refresh()
    count = min(BURST, ctx.pool.count("fabric"))
    if count < 2:
        pytest.skip(f"a burst needs at least 2 gated devices; {count} published")
    lease = ctx.lease(count, "fabric")
    ns = ctx.namespace()
    ctx.objects.create(claim_template("gpu", ctx.device_class(lease)), ns)
    seen = Burst(count)
    with sampler(ctx, lease) as probe, ctx.history(ns) as history:
        for i in range(count):
            ctx.objects.create(pod_with_claim_template(f"app-{i}", "gpu"), ns)
        bindings = wait_bound(ctx, history, pods=count, extra_s=count)
        seen.bound = len(bindings)
        claims = sorted({e.name for e in history.events("claim")})
        for claim in claims:
            allocations = history.allocations(claim)
            node = allocations[-1].node if allocations else None
            seen.gates[claim] = judge(ctx, history, node or "", probe, claim, _pod_of(history, claim) or "")
    held: dict[tuple[str, str], list[tuple[str, int, float]]] = {}
    for claim, gate in seen.gates.items():
        for a in gate.allocations:
            for d in a.devices:
                held.setdefault(d, []).append((claim, a.revision, a.cleared_revision or float("inf")))
    for device, spans in held.items():
        spans.sort(key=lambda s: s[1])
        for (c1, start1, end1), (c2, start2, _) in pairwise(spans):
            if start2 < end1 and c1 != c2:
                seen.twice.append(f"{device}: {c1} from revision {start1} to {end1}, {c2} from revision {start2}")
    for gate in seen.gates.values():
        if gate.ready_to_bind is not None:
            ctx.measure("ready_to_bind_seconds_burst", gate.ready_to_bind)
    return seen


def _pod_of(history: History, claim: str) -> str | None:
    """The pod a claim from a template belongs to (its owner reference)."""
    for e in reversed(history.events("claim")):
        if e.name == claim:
            owners = e.obj.get("metadata", {}).get("ownerReferences") or []
            return next((o["name"] for o in owners if o.get("kind") == "Pod"), None)
    return None


burst = result_fixture("burst", "readiness-burst")


@pytest.mark.requirement("RDY-7")
def test_every_pod_of_a_burst_binds_on_a_ready_device_none_held_twice(burst: Burst) -> None:
    assert burst.bound == burst.pods, f"{burst.bound} of {burst.pods} pods bound"
    assert not burst.twice, "devices held by two claims at once:\n" + "\n".join(burst.twice)
    problems = [f"{claim}: {p}" for claim, g in burst.gates.items() for p in g.early + g.unready_binding]
    assert not problems, "\n".join(problems)
