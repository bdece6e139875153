"""SCH-11's watch of static control-plane pods (cluster/staticpods.py, kind and existing clusters). The API is a
stand-in here (a unit test: the pods and logs a kubelet would report, as kubernetes client models); the real one is
met by every kind run. The panic is a real kube-scheduler 1.37.2 log."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodList,
    V1PodStatus,
)
from kubernetes.client.exceptions import ApiException

from conformance.cluster.staticpods import StaticPodWatch
from conformance.suite.cluster.test_control_plane_up import explained_by_tracker_panic

PANIC_LOG = Path(__file__).parent / "data" / "kube-scheduler-tracker-panic.log"
ENDED = datetime(2026, 12, 7, 6, 42, 44, tzinfo=UTC)


def _pod(component: str, restarts: int, *, exit_code: int = 2) -> V1Pod:
    last = V1ContainerState(
        terminated=V1ContainerStateTerminated(exit_code=exit_code, reason="Error", finished_at=ENDED)
    )
    status = V1ContainerStatus(
        name=component,
        image="kube",
        image_id="",
        ready=True,
        restart_count=restarts,
        state=V1ContainerState(running=V1ContainerStateRunning()),
        last_state=last if restarts else V1ContainerState(),
    )
    meta = V1ObjectMeta(name=f"{component}-node", labels={"component": component, "tier": "control-plane"})
    return V1Pod(metadata=meta, status=V1PodStatus(container_statuses=[status]))


class Core:
    """Stands in for CoreV1Api: kube-system's control-plane pods as given, each previous log from `logs`."""

    def __init__(self, pods: list[V1Pod], logs: dict[str, str] | None = None, *, forbidden: bool = False) -> None:
        self.pods, self.logs, self.forbidden = pods, logs or {}, forbidden
        self.asked: list[tuple[str, Any]] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> V1PodList:
        self.asked.append((namespace, label_selector))
        if self.forbidden:
            raise ApiException(status=403, reason="Forbidden")
        return V1PodList(items=self.pods)

    def read_namespaced_pod_log(self, name: str, namespace: str, **kw: Any) -> str:
        assert kw["previous"] is True
        if name not in self.logs:
            raise ApiException(status=400, reason="Bad Request")
        return self.logs[name]


def test_a_restart_since_the_start_is_a_crash_with_the_cause_its_previous_log_gives() -> None:
    core = Core([_pod("kube-scheduler", 1), _pod("kube-apiserver", 0)])
    crashes = StaticPodWatch.begin(core)  # type: ignore[arg-type]
    assert crashes() == []  # restarts before the run are not the run's
    core.pods = [_pod("kube-scheduler", 2), _pod("kube-apiserver", 0)]
    core.logs = {"kube-scheduler-node": PANIC_LOG.read_text()}
    [crash] = crashes()
    assert crash.component == "kube-scheduler"
    assert crash.cause.startswith("panic: runtime error: index out of range [38] with length 38")
    assert crash.cause.endswith("(exit code 2, Error)")
    assert "resourceslice/tracker." in crash.frame and explained_by_tracker_panic(crash)
    assert crash.at == ENDED.timestamp() and crash.restarted
    assert crash.log == "kube-system/kube-scheduler-node container kube-scheduler (previous)"
    assert core.asked[0] == ("kube-system", "tier=control-plane")


def test_several_restarts_say_how_many_and_a_lost_log_says_so() -> None:
    core = Core([_pod("kube-controller-manager", 0)])
    crashes = StaticPodWatch.begin(core)  # type: ignore[arg-type]
    core.pods = [_pod("kube-controller-manager", 3, exit_code=1)]
    [crash] = crashes()
    assert crash.cause == (
        "restarted 3 times, the last: its previous container's log is not available (400 Bad Request) "
        "(exit code 1, Error)"
    )
    assert not explained_by_tracker_panic(crash)


def test_the_kubelets_line_for_a_log_it_cannot_read_is_not_taken_for_the_log() -> None:
    core = Core([_pod("kube-scheduler", 0)])
    crashes = StaticPodWatch.begin(core)  # type: ignore[arg-type]
    core.pods = [_pod("kube-scheduler", 1)]
    core.logs = {"kube-scheduler-node": "unable to retrieve container logs for containerd://8e57fc5c47d5"}
    [crash] = crashes()
    assert crash.cause == (
        "its previous container's log is not available (200 unable to retrieve container logs for "
        "containerd://8e57fc5c47d5) (exit code 2, Error)"
    )


def test_nothing_is_watched_where_no_component_is_visible() -> None:
    assert StaticPodWatch.begin(Core([]))() is None  # type: ignore[arg-type]  # a managed control plane
    assert StaticPodWatch.begin(Core([], forbidden=True))() is None  # type: ignore[arg-type]  # no right to list
