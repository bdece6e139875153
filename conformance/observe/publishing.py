"""When the implementation has published what it owes: the device read that scenarios start from waits for it.

A controller may log "ready" before the last of a large pool's slices is written, or before its fabric pool is
written at all; a stack that scans its fabric every few seconds publishes in steps; a stack may label the nodes its
pools select only some time after it started. What it owes (promises.publishSeconds from its readiness): the
profile's declared state (`published`: fabric devices or entries in total and per model) and reach (every fabric
pool reaches a Ready schedulable node; a node without node-local devices is reached by a fabric pool, where scenarios
need one: observe/reach.py). The read waits for that, for every pool to be complete (resourceSliceCount) and for
nothing to change for the settle time. Past the promise it waits only for the slices to rest (at most
published.timeoutSeconds in all) and reads them as they are: what is still owed is kept in the PublishLog, and the
scenarios that cannot start without it fail with it as their cause (ImplementationOwes,
suite/implementation/context.py), instead of the run stopping.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.client import Cluster
from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.profile import Profile
from conformance.observe.devices import incomplete_pools
from conformance.observe.reach import shortfalls
from conformance.observe.slices import driver_slices, fabric_slices


def fabric_counts(slices: list[dict[str, Any]], model_attribute: str) -> tuple[int, Counter[str]]:
    """Fabric devices (or counted entries) published, in total and per value of the model attribute."""
    total, per_model = 0, Counter[str]()
    for s in fabric_slices(slices):
        for device in s["spec"].get("devices") or []:
            total += 1
            value = (device.get("attributes") or {}).get(model_attribute) or {}
            if value:
                per_model[str(next(iter(value.values())))] += 1
    return total, per_model


def gated_counts(slices: list[dict[str, Any]]) -> tuple[int, int]:
    """bindingModel node-local: the devices with binding conditions published, and the nodes they are on."""
    gated = [
        s["spec"].get("nodeName") for s in slices for d in s["spec"].get("devices") or [] if d.get("bindingConditions")
    ]
    return len(gated), len(set(gated))


def devices_published(slices: list[dict[str, Any]], profile: Profile) -> tuple[int, str]:
    """The devices `published.fabricDevices` counts, and how they are named for the profile's binding model: fabric
    devices (in fabric pools) or, for node-local, the node-local devices with binding conditions."""
    if profile.has_fabric:
        total, _ = fabric_counts(slices, profile.model_attribute)
        return (
            total,
            f"fabric devices in {len({s['spec']['pool']['name'] for s in fabric_slices(slices)})} fabric pools",
        )
    total, nodes = gated_counts(slices)
    return total, f"node-local devices with binding conditions on {nodes} nodes"


def local_nodes(slices: list[dict[str, Any]]) -> set[str]:
    """Nodes with node-local devices of the driver (a nodeName slice with devices)."""
    return {s["spec"]["nodeName"] for s in slices if s["spec"].get("nodeName") and s["spec"].get("devices")}


def count_shortfall(slices: list[dict[str, Any]], profile: Profile) -> list[str]:
    """What the slices lack of the profile's declared `published` counts (empty: nothing)."""
    want = profile.published
    total, per_model = fabric_counts(slices, profile.model_attribute)
    what = "fabric devices"
    if not profile.has_fabric:
        (total, _), what = gated_counts(slices), "node-local devices with binding conditions"
    short = [f"{total} of {want.fabric_devices} {what} published"] if total < want.fabric_devices else []
    short += [f"{per_model[m]} of {n} {m} published" for m, n in want.per_model.items() if per_model[m] < n]
    return short


@dataclass
class PublishLog:
    """What the implementation published and when, as the device read saw it, relative to its readiness."""

    ready_at: float  # time.time() when the implementation was ready (its processes, or the suite's start)
    promise_s: float  # promises.publishSeconds
    steps: list[tuple[float, str]] = field(default_factory=list)  # (time.time(), what was published, what owed)
    owed: list[str] = field(default_factory=list)  # still owed when the read ended (empty: everything was there)
    read_at: float | None = None
    # The foreign-free phase's opening (suite/phases.py): the promise counts anew from it, so a stack that could not
    # publish beside other drivers' claims is judged on what it publishes without them.
    rebased_at: float | None = None

    @property
    def deadline(self) -> float:
        return max(self.ready_at, self.rebased_at or 0.0) + self.promise_s

    def rebase(self, at: float) -> None:
        """Count the promise anew from `at` (the foreign-free phase's opening)."""
        self.rebased_at = at
        self.note("the foreign-free phase opened: the promise counts anew from here", at)

    def counted_from(self) -> str:
        """What the promise counts from, in words."""
        if self.rebased_at is None:
            return "of its readiness"
        return f"of the foreign-free phase's opening ({self.rel(self.rebased_at)} after its readiness)"

    def rel(self, at: float) -> str:
        return f"+{at - self.ready_at:.1f}s"

    def note(self, text: str, at: float | None = None) -> None:
        if not self.steps or self.steps[-1][1] != text:
            self.steps.append((time.time() if at is None else at, text))

    def describe(self, limit: int = 8) -> str:
        """The read's steps in one line each, relative to the implementation's readiness."""
        steps = self.steps if len(self.steps) <= limit else [*self.steps[:2], *self.steps[-(limit - 2) :]]
        lines = [f"  {self.rel(at)} {text}" for at, text in steps]
        read = f"; devices read at {self.rel(self.read_at)}" if self.read_at else ""
        return (
            f"what the implementation published (seconds from its readiness; promise publishSeconds="
            f"{self.promise_s:g}{read}):\n" + "\n".join(lines)
        )


def settled_slices(
    cluster: Cluster,
    profile: Profile,
    log: PublishLog,
    nodes: Callable[[], list[NodeSpec]],
    need_remote: bool,
) -> list[dict[str, Any]]:
    """The implementation's slices once it has published what it owes and they rest, or, past the promise, once
    they rest (see the module); `log` keeps what was published when, and what is still owed."""
    want, driver = profile.published, profile.driver
    seen: list[tuple[float, tuple[Any, ...]]] = []

    def owed(slices: list[dict[str, Any]]) -> list[str]:
        # Reach is a fabric pool's: a node-local readiness gate's devices sit on their nodes.
        reach = shortfalls(slices, nodes(), local_nodes(slices), need_remote) if profile.has_fabric else []
        return count_shortfall(slices, profile) + reach

    def settled(slices: list[dict[str, Any]]) -> bool:
        state = tuple(sorted((s["metadata"]["name"], s["metadata"]["resourceVersion"]) for s in slices))
        now = time.time()
        if not seen or seen[-1][1] != state:
            seen.append((now, state))
        missing = owed(slices)
        total, what = devices_published(slices, profile)
        log.note(
            f"{len(slices)} slices, {total} {what}; "
            + ("owes: " + "; ".join(missing) if missing else "all it owes is published")
        )
        rests = bool(slices) and not incomplete_pools(slices) and now - seen[-1][0] >= want.settle_s
        return rests and (not missing or now >= log.deadline)

    def describe(slices: list[dict[str, Any]] | None) -> str:
        slices = slices or []
        if not seen:
            return "no list yet"
        missing = owed(slices)
        total, what = devices_published(slices, profile)
        return (
            f"{len(slices)} slices, {total} {what}; incomplete pools "
            f"{incomplete_pools(slices)}; owed: {missing or 'nothing'}; "
            f"last change {time.time() - seen[-1][0]:.1f}s ago"
        )

    kind = "fabric devices" if profile.has_fabric else "node-local devices with binding conditions"
    goal = f"at least {want.fabric_devices} {kind}" + "".join(f", {n} {m}" for m, n in want.per_model.items())
    try:
        slices = wait_for(
            lambda: driver_slices(cluster, driver),
            settled,
            timeout=max(1.0, log.ready_at + profile.read_timeout_s() - time.time()),
            expected=f"the slices of {driver} complete with {goal} and reach, unchanged for {want.settle_s:g}s",
            describe=describe,
            max_interval=0.5,
        )
    except WaitTimeout as exc:  # never rested: read as they are; the scenarios say what is missing
        slices = driver_slices(cluster, driver)
        log.note(f"the slices never rested for {want.settle_s:g}s: {str(exc).splitlines()[0]}")
    log.read_at = time.time()
    log.owed = owed(slices)
    return slices
