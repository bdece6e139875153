"""What a scenario works with: its own API client, objects, namespaces and the run-wide record (ClusterContext; an
implementation scenario's Context adds the implementation: implementation/context.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.client import Cluster
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from conformance.observe.recorder import Recorder
from conformance.observe.views import History
from conformance.suite.record import Scenario

NAMESPACE_READY_S = 30.0


@dataclass(kw_only=True)
class ClusterContext:
    """What a scenario works with: its own API client (threads do not share one), objects and namespaces."""

    scenario: Scenario
    cluster: Cluster
    objects: ObjectTracker
    say: Callable[[str], None]
    record: Recorder  # the run-wide record: what scenarios observe is read from it
    namespaces: set[str] = field(default_factory=set)
    measurements: dict[str, list[float]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # run options scenarios read (e.g. scale_pods)
    reached: list[str] = field(default_factory=list)  # the record's steps the scenario reached (ctx.step), in order
    # What it observed so far, read when it fails (a callable reads it from the run-wide record then).
    observed: Callable[[], Any] | None = None

    def namespace(self, prefix: str | None = None) -> str:
        """A fresh namespace of this scenario with its default ServiceAccount ready."""
        base = re.sub(r"[^a-z0-9-]+", "-", (prefix or self.scenario.name).lower()).strip("-")[:40]
        ns = self.objects.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": f"{base}-"}})
        name = ns.metadata.name
        self.namespaces.add(name)
        wait_for(
            lambda: self.cluster.core.read_namespaced_service_account("default", name),
            bool,
            timeout=NAMESPACE_READY_S,
            expected=f"ServiceAccount {name}/default (created by kube-controller-manager)",
        )
        return name

    def history(self, namespace: str) -> History:
        """The claims and pods of one of the scenario's namespaces, as the run-wide record holds them."""
        return History(self.record, namespace)

    def step(self, name: str, observed: Callable[[], Any]) -> None:
        """The scenario reached step `name` of its record (Step): the requirements whose evidence exists from here
        are judged on `observed()` (what it has observed so far, read when needed) if a later step fails."""
        if name not in {s.name for s in self.scenario.steps}:
            raise ValueError(f"scenario {self.scenario.name!r} declares no step {name!r}")
        self.reached.append(name)
        self.observed = observed

    def measure(self, key: str, value: float) -> None:
        self.measurements.setdefault(key, []).append(value)

    def requirements_missing(self) -> str | None:
        """Why this scenario cannot run here (the runner skips it with this reason), or None."""
        return None

    def stack_accounts(self) -> set[str] | None:
        """The accounts whose refusals are a failure's evidence (suite/cause.py); None: no stack (the suite's own
        drivers)."""
        return None

    def rights_missing(self) -> list[str]:
        """Rights the stack's accounts lack for what this scenario needs of them (Context: IMP-9's rules)."""
        return []

    def scenario_logs(self, since: float) -> tuple[str, str]:
        """The implementation's log lines about this scenario since `since`: (the first that says something went
        wrong, all of them as a block); none without an implementation."""
        return "", ""

    def release(self) -> None:
        """Give back what the scenario held (devices), once its objects are gone."""

    @property
    def identities(self) -> set[str]:
        """Physical devices of the implementation this scenario used (none for cluster scenarios)."""
        return set()
