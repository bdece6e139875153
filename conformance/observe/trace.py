"""Follow the pods and claims of one scenario namespace from creation to binding, with timestamps.

A scenario samples its own namespace every SAMPLE_S (the sampling period of the record, not a wait for the
cluster); the session's InvariantWatcher covers what must hold at every moment. The trace keeps, per claim,
every distinct allocation and when each binding condition was first seen True, and per pod when it was bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.client import Cluster
from conformance.cluster.waits import WaitTimeout, check_cancelled
from conformance.observe.invariants import binding_state
from conformance.observe.slices import allocation_results, device_conditions, result_key

SAMPLE_S = 0.1


@dataclass
class Trace:
    namespace: str
    every: float = SAMPLE_S
    started: float = field(default_factory=time.time)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)  # latest state
    allocations: dict[str, list[tuple[tuple[str, str, str], ...] | None]] = field(default_factory=dict)
    true_at: dict[tuple[str, tuple[str, str, str], str], float] = field(default_factory=dict)  # (claim, dev, type)
    ready_at: dict[str, float] = field(default_factory=dict)  # claim -> all binding conditions True
    allocated_at: dict[str, float] = field(default_factory=dict)  # claim -> first seen allocated
    bound: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod -> (node, when)
    pods: dict[str, Any] = field(default_factory=dict)  # latest V1Pod

    def sample(self, cluster: Cluster) -> None:
        now = time.time()
        items = cluster.kind("resource.k8s.io/v1", "ResourceClaim").get(namespace=self.namespace).to_dict()["items"]
        for claim in items:
            name = claim["metadata"]["name"]
            self.claims[name] = claim
            results = allocation_results(claim)
            key = tuple(result_key(r) for r in results) or None
            if key:
                self.allocated_at.setdefault(name, now)
            history = self.allocations.setdefault(name, [])
            if not history or history[-1] != key:
                history.append(key)
            for r in results:
                for ctype, status in device_conditions(claim, r).items():
                    if status == "True":
                        self.true_at.setdefault((name, result_key(r), ctype), now)
            if binding_state(claim) == "ready":
                self.ready_at.setdefault(name, now)
            else:
                self.ready_at.pop(name, None)
        for pod in cluster.core.list_namespaced_pod(self.namespace).items:
            self.pods[pod.metadata.name] = pod
            if pod.spec.node_name and pod.metadata.name not in self.bound:
                self.bound[pod.metadata.name] = (pod.spec.node_name, now)

    def follow(self, cluster: Cluster, until: Callable[[Trace], bool], timeout: float, expected: str) -> Trace:
        """Sample until `until(self)` holds; fail after `timeout` with the pods and claims last seen."""
        deadline = time.monotonic() + timeout
        while True:
            self.sample(cluster)
            if until(self):
                # Claims were listed before pods: one more round so the claims are at least as new as the pods.
                self.sample(cluster)
                return self
            if time.monotonic() > deadline:
                raise WaitTimeout(f"timed out after {timeout:g}s waiting for {expected}\nlast seen: {self.describe()}")
            check_cancelled()
            time.sleep(self.every)

    def describe(self) -> str:
        pods = {n: (p.status.phase, p.spec.node_name) for n, p in self.pods.items()}
        claims = {n: (binding_state(c), self.allocations.get(n, [])[-1:]) for n, c in self.claims.items()}
        return f"namespace {self.namespace}: pods {pods}; claims (state, allocation) {claims}"

    def events(self, cluster: Cluster, reason: str) -> dict[str, int]:
        """Pod name -> number of events with `reason` in the namespace."""
        out: dict[str, int] = {}
        for e in cluster.core.list_namespaced_event(self.namespace).items:
            if e.reason == reason and e.involved_object.kind == "Pod":
                out[e.involved_object.name] = out.get(e.involved_object.name, 0) + (e.count or 1)
        return out
