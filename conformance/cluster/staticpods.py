"""SCH-11 where the suite does not run the control plane itself (kind, an existing cluster): the kubelet runs the
components as static pods and restarts one that exits, so a crash shows as a restart of its container. The run's
start is the baseline; at the end every container restarted since then is a crash, with its exit code and the cause
its previous container's log gives (crashlog.py), read through the API. Where no component is visible as a pod
(a managed control plane), nothing is watched and SCH-11 says so.

Only restarts count, never a container's present state: a component that is down at the end but never exited (its
pod pending) is a stuck cluster the scenarios' own waits report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kubernetes.client import CoreV1Api, V1ContainerStatus, V1Pod
from kubernetes.client.exceptions import ApiException

from conformance.cluster.crashlog import crash_cause
from conformance.cluster.providers.base import Crash

NAMESPACE = "kube-system"
SELECTOR = "tier=control-plane"  # kubeadm's static pods (kind, most self-managed clusters)
_NO_LOG = "unable to retrieve container logs"  # seen on kind 1.37.2 after a SIGABRT
LOG_TAIL_LINES = 400  # a panic's trace ends the log; the panicking goroutine fits well within this


def _containers(pods: list[V1Pod]) -> dict[tuple[str, str], tuple[V1Pod, V1ContainerStatus]]:
    return {
        (pod.metadata.name, status.name): (pod, status)
        for pod in pods
        for status in (pod.status.container_statuses or [])
    }


@dataclass
class StaticPodWatch:
    """The control-plane pods' restart counts at the run's start; `crashes()` the restarts since."""

    core: CoreV1Api
    baseline: dict[tuple[str, str], int]

    @classmethod
    def begin(cls, core: CoreV1Api) -> Callable[[], list[Crash] | None]:
        """The watch's `crashes`, or a callable returning None where no control-plane pod can be listed."""
        try:
            pods = core.list_namespaced_pod(NAMESPACE, label_selector=SELECTOR).items
        except Exception:  # no right to list kube-system's pods (a managed control plane), or no answer: not watched
            return lambda: None
        if not pods:
            return lambda: None
        baseline = {key: status.restart_count or 0 for key, (_, status) in _containers(pods).items()}
        return cls(core, baseline).crashes

    def crashes(self) -> list[Crash]:
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=SELECTOR).items
        found = []
        for key, (pod, status) in _containers(pods).items():
            restarts = (status.restart_count or 0) - self.baseline.get(key, 0)
            if restarts > 0:
                found.append(self._crash(pod, status, restarts))
        return sorted(found, key=lambda c: c.at)

    def _crash(self, pod: V1Pod, status: V1ContainerStatus, restarts: int) -> Crash:
        name = pod.metadata.name
        component = (pod.metadata.labels or {}).get("component") or status.name
        ended = status.last_state.terminated if status.last_state else None
        log, unreadable = self._previous_log(name, status.name)
        cause, frame = crash_cause(log) if not unreadable else (unreadable, "")
        if ended is not None:
            cause = f"{cause} (exit code {ended.exit_code}{f', {ended.reason}' if ended.reason else ''})"
        if restarts > 1:
            cause = f"restarted {restarts} times, the last: {cause}"
        at = ended.finished_at if ended is not None and isinstance(ended.finished_at, datetime) else None
        return Crash(
            component,
            at.timestamp() if at is not None else time.time(),  # when the kubelet lost it, else when seen
            cause,
            frame,
            f"{NAMESPACE}/{name} container {status.name} (previous)",
            restarted=status.state is not None and status.state.running is not None,
        )

    def _previous_log(self, pod: str, container: str) -> tuple[str, str]:
        """The end of the container's previous log, or why it cannot be read ("" : it was)."""
        try:
            log = (
                self.core.read_namespaced_pod_log(
                    pod, NAMESPACE, container=container, previous=True, tail_lines=LOG_TAIL_LINES
                )
                or ""
            )
        except ApiException as exc:  # the kubelet keeps one previous container's log, and may have lost it
            return "", f"its previous container's log is not available ({exc.status} {exc.reason})"
        if log.startswith(_NO_LOG):  # the kubelet answers 200 with this line when it cannot read the log
            return "", f"its previous container's log is not available (200 {log.strip()[:200]})"
        return log, ""
