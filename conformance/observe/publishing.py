"""When the implementation has finished publishing: the device read that scenarios start from waits for it.

A controller may log "ready" before the last of a large pool's slices is written, or before its fabric pool is
written at all; a stack that scans its fabric every few seconds publishes in steps. The read waits until every pool
is complete (resourceSliceCount), the profile's declared state is reached (`published`: fabric devices or entries
in total and per model) and nothing changed for the settle time. Without a declared state, an implementation that
publishes no fabric pool within FABRIC_GRACE_S is read as it is (IMP-1 then says what is missing).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from conformance.cluster.client import Cluster
from conformance.cluster.waits import wait_for
from conformance.implementation.profile import Profile
from conformance.observe.devices import incomplete_pools
from conformance.observe.slices import driver_slices, fabric_slices

FABRIC_GRACE_S = 30.0


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


def settled_slices(cluster: Cluster, profile: Profile) -> list[dict[str, Any]]:
    """The implementation's slices once publishing is done (see the module); a declared state not reached in its
    timeout fails with what was published."""
    want, driver = profile.published, profile.driver
    started = time.monotonic()
    seen: list[tuple[float, tuple[Any, ...]]] = []

    def shortfall(slices: list[dict[str, Any]]) -> list[str]:
        total, per_model = fabric_counts(slices, profile.model_attribute)
        short = [f"{total} of {want.fabric_devices} fabric devices"] if total < want.fabric_devices else []
        short += [f"{per_model[m]} of {n} {m}" for m, n in want.per_model.items() if per_model[m] < n]
        return short

    def settled(slices: list[dict[str, Any]]) -> bool:
        state = tuple(sorted((s["metadata"]["name"], s["metadata"]["resourceVersion"]) for s in slices))
        now = time.monotonic()
        if not seen or seen[-1][1] != state:
            seen.append((now, state))
        if want.declared:
            enough = not shortfall(slices)
        else:
            enough = bool(fabric_slices(slices)) or now - started >= FABRIC_GRACE_S
        return bool(slices) and enough and not incomplete_pools(slices) and now - seen[-1][0] >= want.settle_s

    def describe(slices: list[dict[str, Any]] | None) -> str:
        slices = slices or []
        if not seen:
            return "no list yet"
        missing = "; short of: " + ", ".join(shortfall(slices)) if want.declared and shortfall(slices) else ""
        return (
            f"{len(slices)} slices, {len(fabric_slices(slices))} of fabric pools; incomplete pools "
            f"{incomplete_pools(slices)}{missing}; last change {time.monotonic() - seen[-1][0]:.1f}s ago"
        )

    goal = f"at least {want.fabric_devices} fabric devices" + "".join(f", {n} {m}" for m, n in want.per_model.items())
    return wait_for(
        lambda: driver_slices(cluster, driver),
        settled,
        timeout=want.timeout_s,
        expected=f"the slices of {driver} to be complete, "
        + (f"with {goal}" if want.declared else "with fabric pools")
        + f", and unchanged for {want.settle_s:g}s",
        describe=describe,
        max_interval=0.5,
    )
