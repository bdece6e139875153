"""SCALE-1, the KEP test plan's stress case: many pods waiting in PreBind all bind once their devices are
attached (for a node-local readiness gate: readied), none lost. The same number of pods is also scheduled with
node-local devices only (a suite-owned driver, no binding conditions) in the same run on the same cluster, so the
report can give both throughputs and their ratio. --scale-pods sets the count (1000 is the KEP's figure; the default
keeps the normal run short).
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.manifests import (
    claim_template,
    device_class,
    node_local_slices,
    pod_with_claim_template,
    unique_driver,
)
from conformance.cluster.waits import wait_for
from conformance.observe.devices import fabric_only_nodes
from conformance.observe.slices import allocation_results, result_key
from conformance.observe.views import History
from conformance.report.outcomes import NOTE_PROPERTY
from conformance.suite.scenario import Context, result_fixture, scenario

CREATE_THREADS = 8
KEP_PODS = 1000  # KEP-5007's test plan: "a stress test with 1000 Pods waiting in PreBind"
SECONDS_PER_POD = 0.5  # deadline slack per pod on a 2-core machine, on top of the promised attach time


@dataclass
class Wave:
    pods: int
    seconds: float  # first pod created -> last pod bound
    bound: int
    peak_waiting: int  # most pods seen allocated but not yet bound at once
    distinct_devices: int
    misplaced: list[str]  # pods bound to a node other than their claim's allocation
    # per pod: its claim first seen allocated (written in PreBind) -> the pod seen bound: its time in PreBind
    in_prebind: list[float] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.bound / self.seconds if self.seconds else 0.0

    def prebind(self) -> str:
        """p50 / p99 of the time in PreBind, as the KEP's stress test asks for it."""
        if len(self.in_prebind) < 2:
            return "not measured"
        p99 = statistics.quantiles(self.in_prebind, n=100, method="inclusive")[98]
        return f"p50 {statistics.median(self.in_prebind):.2f} s, p99 {p99:.2f} s"


@dataclass
class Scale:
    with_conditions: Wave
    without_conditions: Wave


def _wave(ctx: Context, device_class_name: str, count: int, label: str, nodes: list[str] | None = None) -> Wave:
    ns = ctx.namespace(f"scale-{label}")
    ctx.objects.create(claim_template("dev", device_class_name), ns)
    names = [f"pod-{i:04d}" for i in range(count)]
    labels = {"conformance.dra.example.com/run": ctx.objects.run_id}
    deadline = ctx.profile.promises.attach_s + 60.0 + SECONDS_PER_POD * count
    ctx.say(f"SCALE-1 {label}: creating {count} pods")
    started = time.time()

    def create(name: str) -> None:
        pod = pod_with_claim_template(name, "dev")
        pod["metadata"]["labels"] = labels  # the namespace is tracked; its deletion removes the pods
        if nodes:
            term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}
            pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term]}}}  # fmt: skip
        ctx.cluster.core.create_namespaced_pod(ns, pod)

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(create, names))
    peak = [0]
    reported = [started]
    history = ctx.history(ns)

    def done(seen: _Seen) -> bool:
        allocated = {name for name, c in seen.claims.items() if allocation_results(c)}
        bound_claims = {seen.claim_of(name) for name in seen.bound}
        peak[0] = max(peak[0], len(allocated - bound_claims))
        if time.time() - reported[0] > 10:
            reported[0] = time.time()
            ctx.say(f"SCALE-1 {label}: {len(seen.bound)}/{count} bound, {len(allocated - bound_claims)} waiting")
        # A bound pod's claim was allocated before the binding, but the record's claim stream may trail its pod
        # stream: wait until it shows every bound pod's claim allocated, which the checks below read.
        return len(seen.bound) >= count and bound_claims <= allocated

    trace = wait_for(
        lambda: _Seen.of(history),
        done,
        timeout=deadline,
        expected=f"{count} pods of {ns} bound",
        describe=lambda s: f"{len(s.bound) if s else 0} of {count} bound",
        max_interval=max(0.2, count / 500),
    )
    seconds = max(when for _, when in trace.bound.values()) - started
    devices, misplaced = set(), []
    for name in trace.pods:
        claim = trace.claims[trace.claim_of(name)]
        results = allocation_results(claim)
        devices |= {result_key(r) for r in results}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms", [])
        nodes = {v for t in terms for f in t.get("matchFields", []) for v in f.get("values", [])}
        if nodes and trace.bound[name][0] not in nodes:
            misplaced.append(f"{name} on {trace.bound[name][0]}, allocation on {sorted(nodes)}")
    in_prebind = [  # claim first seen allocated -> pod seen bound, per pod
        round(trace.bound[name][1] - trace.allocated_at[claim], 3)
        for name in trace.pods
        if (claim := trace.claim_of(name)) in trace.allocated_at
    ]
    if label == "with-conditions":
        key = "attach_to_bind_seconds" if ctx.profile.has_fabric else "ready_to_bind_seconds"  # node-local: no attach
        for value in in_prebind:
            ctx.measure(key, value)
    ctx.say(f"SCALE-1 {label}: {count} pods bound in {seconds:.1f}s ({count / seconds:.1f}/s)")
    return Wave(count, round(seconds, 2), len(trace.bound), peak[0], len(devices), misplaced, in_prebind)


@dataclass
class _Seen:
    """A wave's pods and claims as the run-wide record holds them."""

    claims: dict[str, dict[str, Any]] = field(default_factory=dict)  # latest state
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    allocated_at: dict[str, float] = field(default_factory=dict)  # claim -> first recorded allocated
    bound: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod -> (node, first recorded bound)

    @classmethod
    def of(cls, history: History) -> _Seen:
        seen = cls()
        for e in history.events():
            if e.deleted:
                continue
            if e.kind == "claim":
                seen.claims[e.name] = e.obj
                if allocation_results(e.obj):
                    seen.allocated_at.setdefault(e.name, e.at)
            else:
                seen.pods[e.name] = e.obj
                if node := (e.obj.get("spec") or {}).get("nodeName"):
                    seen.bound.setdefault(e.name, (node, e.at))
        return seen

    def claim_of(self, pod: str) -> str:
        statuses = (self.pods[pod].get("status") or {}).get("resourceClaimStatuses") or []
        return next((s["resourceClaimName"] for s in statuses if s.get("resourceClaimName")), "")


@scenario(
    "scale",
    "N pods with the implementation's devices with binding conditions (fabric, or node-local for a readiness gate) "
    "wait in PreBind and all bind; then N with devices without conditions, for comparison",
    ("SCALE-1",),
    remote=False,  # spreads over every node a fabric pool reaches
)
def scale(ctx: Context) -> Scale:
    count = ctx.options.get("scale_pods", 16)
    # Count-based: a class of the model matches every copy of it, so these pods could take the copies other
    # scenarios wait for on their nodes; they stay off the nodes those scenarios use (fabric-only ones) if they can.
    ctx.refresh()
    spread: list[str] | None = None
    if ctx.counted:
        reached = sorted({n for c in ctx.pool.counted.values() for n in c.nodes})
        spread = [n for n in reached if n not in fabric_only_nodes(ctx.pool, ctx.nodes())] or None
    lease = ctx.lease(count, "fabric", spread)
    fabric_class = ctx.device_class(lease)
    driver = unique_driver("scale")
    nodes = [n.name for n in ctx.nodes()]
    if not nodes:
        pytest.skip("no schedulable Ready node without NoSchedule taints for the baseline wave")
    ctx.objects.create(device_class(driver, driver))
    for s in node_local_slices(driver, nodes, -(-count // len(nodes))):
        ctx.objects.create(s)
    without = _wave(ctx, driver, count, "without-conditions")
    with_ = _wave(ctx, fabric_class, count, "with-conditions", spread)
    ctx.measure("scale_pods_per_second_with_conditions", with_.per_second)
    ctx.measure("scale_pods_per_second_without_conditions", without.per_second)
    ctx.measure("scale_seconds_to_all_bound_with_conditions", with_.seconds)
    return Scale(with_, without)


result = result_fixture("result", "scale")


def latency_note(result: Scale) -> str:
    """The figures KEP-5007's stress test asks for: time in PreBind with conditions, throughput, and its ratio to the
    same pods without conditions (from the run-wide record)."""
    wave, base = result.with_conditions, result.without_conditions
    ratio = wave.per_second / base.per_second if base.per_second else 0.0
    scale = "" if wave.pods >= KEP_PODS else f" (the KEP's stress test: {KEP_PODS}, --scale-pods {KEP_PODS})"
    return (
        f"{wave.pods} pods with binding conditions{scale}, up to {wave.peak_waiting} waiting in PreBind at once: in "
        f"PreBind {wave.prebind()}; {wave.per_second:.1f} pods bound per second ({base.per_second:.1f} without "
        f"conditions, ratio {ratio:.2f}); all bound in {wave.seconds:.1f} s"
    )


@pytest.mark.requirement("SCALE-1")
def test_many_pods_waiting_in_prebind_all_bind(result: Scale, record_property: Any) -> None:
    wave = result.with_conditions
    record_property(NOTE_PROPERTY, latency_note(result))
    record_property("pods", wave.pods)
    record_property("seconds_with_conditions", wave.seconds)
    record_property("seconds_without_conditions", result.without_conditions.seconds)
    assert wave.bound == wave.pods, f"{wave.pods - wave.bound} of {wave.pods} pods never bound; {latency_note(result)}"
    assert wave.distinct_devices == wave.pods, f"{wave.pods} claims hold only {wave.distinct_devices} devices"
    assert not wave.misplaced, wave.misplaced
    assert wave.peak_waiting > 1, f"at most {wave.peak_waiting} pod was seen waiting in PreBind at once"
    base = result.without_conditions
    assert base.bound == base.pods and not base.misplaced, f"baseline: {base}"
