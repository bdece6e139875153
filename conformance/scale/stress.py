"""The KEP's stress shape on a running cluster: N pods on devices without binding conditions (a suite-owned node-local
pool on every node), then N pods on the reference's fabric devices, every attach held by the fabric manager's fault
injector until all N pods are allocated and waiting in PreBind at once, then released: the pods bind as their
conditions are written. Each wave's moments are read from the run-wide record."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import (
    claim_template,
    device_class,
    node_local_slices,
    pod_with_claim_template,
    unique_driver,
)
from conformance.cluster.objects import RUN_LABEL
from conformance.cluster.waits import wait_while_progressing
from conformance.implementation.faults import FaultInjector
from conformance.observe.recorder import Recorder
from conformance.scale.bringup import CREATE_THREADS, create_side_by_side
from conformance.scale.waves import Moments

RESOURCE = ("resource.k8s.io", "v1")
POLL_S = 1.0
REPORT_EVERY_S = 30.0
NODE_DEVICES = 8  # node-local devices per node, as a node with 8 GPUs: a pod rarely meets a node that is full


@dataclass
class Wave:
    namespace: str
    moments: Moments
    released: float | None = None  # the hold let go (with conditions)
    held: int = 0  # attaches the fabric manager held at the release


def driver_class(cluster: Cluster, driver: str, name: str) -> str:
    """A DeviceClass `name` of every device of `driver`."""
    body = device_class(name, driver)
    client.CustomObjectsApi(cluster.api).create_cluster_custom_object(*RESOURCE, "deviceclasses", body)
    return name


def baseline_pool(cluster: Cluster, pods: int, nodes: list[str]) -> tuple[str, int]:
    """A suite-owned driver with a node-local pool on every node (no binding conditions), enough devices for every
    pod; (its device class, slices written)."""
    driver = unique_driver("scale-baseline")
    driver_class(cluster, driver, driver)
    custom = client.CustomObjectsApi(cluster.api)
    slices = node_local_slices(driver, nodes, max(NODE_DEVICES, math.ceil(pods / len(nodes))))
    create = partial(custom.create_cluster_custom_object, *RESOURCE, "resourceslices")
    create_side_by_side(create, slices, CREATE_THREADS)
    return driver, len(slices)


@dataclass
class Stress:
    cluster: Cluster
    record: Recorder
    run_id: str
    pods: int
    say: Callable[[str], None]
    stall_s: float
    guard: Callable[[], None] = lambda: None  # raises when the machine runs short of memory

    def _namespace(self, label: str, device_class_name: str) -> str:
        name = f"scale-{label}-{self.run_id}"
        self.cluster.core.create_namespace({"metadata": {"name": name}})
        body = claim_template("dev", device_class_name)
        client.CustomObjectsApi(self.cluster.api).create_namespaced_custom_object(
            *RESOURCE, name, "resourceclaimtemplates", body
        )
        return name

    def _create_pods(self, namespace: str) -> None:
        def pod(i: int) -> dict[str, Any]:
            body = pod_with_claim_template(f"pod-{i:05d}", "dev")
            body["metadata"]["labels"] = {RUN_LABEL: self.run_id}  # the record watches the run's pods
            return body

        create = partial(self.cluster.core.create_namespaced_pod, namespace)
        create_side_by_side(create, [pod(i) for i in range(self.pods)], CREATE_THREADS)

    def _wait(self, namespace: str, done: Callable[[Moments], bool], what: str, progress: str) -> Moments:
        reported = [time.monotonic()]
        followed = Moments(namespace)

        def counts(m: Moments) -> tuple[int, int]:
            return sum(1 for c in m.claims.values() if c.allocated), sum(1 for p in m.pods.values() if p.bound)

        def observe() -> Moments:
            self.guard()
            m = followed.take(self.record.after_seq(followed.seen))
            if time.monotonic() - reported[0] > REPORT_EVERY_S:
                reported[0] = time.monotonic()
                allocated, bound = counts(m)
                self.say(f"{progress}: {allocated} allocated, {bound} bound of {self.pods}")
            return m

        return wait_while_progressing(
            observe,
            done,
            lambda m: sum(counts(m)) + len(m.pods),
            stall=self.stall_s,
            expected=what,
            describe=lambda m: "{} allocated, {} bound".format(*counts(m)),
            interval=POLL_S,
        )

    def _all_bound(self, m: Moments) -> bool:
        # the claim stream may trail the pod stream: every bound pod's claim seen allocated too
        return len(m.pods) >= self.pods and all(p.bound and m.claim_of(n).allocated for n, p in m.pods.items())

    def without_conditions(self, device_class_name: str) -> Wave:
        ns = self._namespace("without", device_class_name)
        self.say(f"without binding conditions: creating {self.pods} pods in {ns}")
        self._create_pods(ns)
        m = self._wait(ns, self._all_bound, f"{self.pods} pods of {ns} bound", "without conditions")
        return Wave(ns, m)

    def with_conditions(self, device_class_name: str, faults: FaultInjector, model: str) -> Wave:
        """Every attach held until all pods wait in PreBind (their claims allocated, conditions not yet True)."""
        ns = self._namespace("with", device_class_name)
        fault = faults.arm_all("hang", self.pods, model=model)
        try:
            self.say(f"with binding conditions (attaches held): creating {self.pods} pods in {ns}")
            self._create_pods(ns)

            def all_waiting(m: Moments) -> bool:
                return len(m.pods) >= self.pods and all(m.claim_of(n).allocated for n in m.pods)

            self._wait(ns, all_waiting, f"{self.pods} claims of {ns} allocated (waiting in PreBind)", "held")
            held = len(faults.hung())
        finally:  # disarmed before the release: an attach queued in the controller would take the fault and hang
            faults.disarm(fault)
            released = time.time()
            faults.release_fault(fault)
        self.say(f"all {self.pods} pods waiting in PreBind ({held} attaches hung in the fabric); released")
        m = self._wait(ns, self._all_bound, f"{self.pods} pods of {ns} bound", "released")
        return Wave(ns, m, released, held)
