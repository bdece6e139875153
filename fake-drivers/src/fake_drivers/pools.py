"""A DRA pool as one or more ResourceSlices: split on write, reassembled on read (resource.k8s.io/v1).

A slice holds at most 128 devices (k8s.io/api resource/v1 `ResourceSliceMaxDevices`; 64 when devices carry
taints or consume counters, which ours never do). A bigger pool is cut into several slices that all carry the
same `pool.generation` and `pool.resourceSliceCount`. Consumers (the scheduler's allocator, 1.37) use only the
slices of a pool's newest generation. A pool with fewer slices at that generation than `resourceSliceCount` is
incomplete: a request for "all" devices fails on it, but an exact-count request still gets the devices it has.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .dra import RESOURCE_GROUP, RESOURCE_VERSION

MAX_DEVICES_PER_SLICE = 128
PLURAL = "resourceslices"


def split(devices: list[dict[str, Any]], size: int = MAX_DEVICES_PER_SLICE) -> list[list[dict[str, Any]]]:
    """Device entries, sorted by name, cut into slices of at most `size`; an empty pool is one empty slice."""
    ordered = sorted(devices, key=lambda d: d["name"])
    count = max(1, math.ceil(len(ordered) / size))
    return [ordered[i * size : (i + 1) * size] for i in range(count)]


def part_name(base: str, index: int) -> str:
    """Slice `index` of a pool: the first keeps the single-slice name, so a small pool looks as it always did."""
    return base if index == 0 else f"{base}-part{index}"[:253]


def pool_bodies(base: dict[str, Any], devices: list[dict[str, Any]], generation: int) -> list[dict[str, Any]]:
    """The slices of one pool from a template slice (`base`: metadata.name = the pool's base name, spec without
    devices), each with its share of the devices and the pool's generation and slice count."""
    parts = split(devices)
    bodies = []
    for index, part in enumerate(parts):
        body = {**base, "metadata": {**base["metadata"], "name": part_name(base["metadata"]["name"], index)}}
        pool = {**base["spec"]["pool"], "generation": generation, "resourceSliceCount": len(parts)}
        body["spec"] = {**base["spec"], "pool": pool, "devices": part}
        bodies.append(body)
    return bodies


@dataclass(frozen=True)
class Pool:
    """What a consumer sees of one pool: the slices of its newest generation."""

    driver: str
    name: str
    generation: int
    slices: tuple[dict[str, Any], ...]

    @property
    def complete(self) -> bool:
        """All slices of the newest generation are there (else the pool is being updated)."""
        counts = {int(s["spec"]["pool"].get("resourceSliceCount", 1)) for s in self.slices}
        return counts == {len(self.slices)}

    @property
    def devices(self) -> list[dict[str, Any]]:
        return [d for s in self.slices for d in s["spec"].get("devices") or []]


def current_pools(slices: Iterable[dict[str, Any]]) -> dict[tuple[str, str], Pool]:
    """(driver, pool name) -> the pool as a consumer sees it; slices of older generations are left out."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in slices:
        grouped[(s["spec"]["driver"], s["spec"]["pool"]["name"])].append(s)
    out = {}
    for (driver, name), members in grouped.items():
        newest = max(int(s["spec"]["pool"].get("generation", 0)) for s in members)
        current = tuple(
            sorted(
                (s for s in members if int(s["spec"]["pool"].get("generation", 0)) == newest),
                key=lambda s: s["metadata"]["name"],
            )
        )
        out[(driver, name)] = Pool(driver, name, newest, current)
    return out


def pool_problem(slices: list[dict[str, Any]], names: list[str]) -> str:
    """'' when `slices` are exactly one pool, split as it must be, listing `names` once each; else what is wrong."""
    pools = {(int(s["spec"]["pool"]["generation"]), int(s["spec"]["pool"]["resourceSliceCount"])) for s in slices}
    listed = sorted(d["name"] for s in slices for d in s["spec"].get("devices") or [])
    want = len(split([{"name": n} for n in names]))
    if len(pools) != 1 or len(slices) != want or next(iter(pools))[1] != len(slices):
        return f"{len(slices)} slices, (generation, count) {sorted(pools)}; want {want} of one generation"
    if any(len(s["spec"].get("devices") or []) > MAX_DEVICES_PER_SLICE for s in slices):
        return f"a slice with more than {MAX_DEVICES_PER_SLICE} devices"
    if listed != sorted(names):
        return f"{len(listed)} device entries ({len(set(listed))} distinct), want {len(names)}"
    return ""


def is_current(published: list[dict[str, Any]], desired: list[dict[str, Any]], content: Callable[[Any], Any]) -> bool:
    """The published slices of a pool already are `desired` (names, content, one generation, right count)."""
    by_name = {s["metadata"]["name"]: s for s in published}
    if set(by_name) != {d["metadata"]["name"] for d in desired}:
        return False
    if len({int(s["spec"]["pool"].get("generation", 0)) for s in published}) != 1:
        return False
    return all(
        int(by_name[d["metadata"]["name"]]["spec"]["pool"].get("resourceSliceCount", 1)) == len(desired)
        and content(by_name[d["metadata"]["name"]]) == content(d)
        for d in desired
    )


def write_pool(
    api: client.CustomObjectsApi,
    published: list[dict[str, Any]],
    base: dict[str, Any],
    devices: list[dict[str, Any]],
    content: Callable[[Any], Any],
) -> int | None:
    """Make the pool's slices say `devices`; returns the generation written, None when nothing changed.

    `published` are the pool's slices as read now (any generation). Every slice is written with the next
    generation (one generation per pool), then extra slices of a pool that shrank are deleted: until then they
    carry the old generation, which consumers ignore. A 409 on the way propagates: the caller reads again.
    """
    if is_current(published, pool_bodies(base, devices, 0), content):
        return None
    generation = 1 + max((int(s["spec"]["pool"].get("generation", 0)) for s in published), default=0)
    by_name = {s["metadata"]["name"]: s for s in published}
    bodies = pool_bodies(base, devices, generation)
    for body in bodies:
        name = body["metadata"]["name"]
        if name in by_name:
            body["metadata"]["resourceVersion"] = by_name[name]["metadata"]["resourceVersion"]
            api.replace_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, name, body)
        else:
            api.create_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, body)
    for name in sorted(set(by_name) - {b["metadata"]["name"] for b in bodies}):
        delete_slice(api, name)
    return generation


def brief(names: list[str], limit: int = 16) -> list[str]:
    """Names for a log line: a 1000-device pool is not worth every name."""
    return names if len(names) <= limit else [*names[:limit], f"... {len(names) - limit} more"]


def delete_slice(api: client.CustomObjectsApi, name: str) -> None:
    try:
        api.delete_cluster_custom_object(RESOURCE_GROUP, RESOURCE_VERSION, PLURAL, name)
    except ApiException as exc:
        if exc.status != 404:
            raise
