"""Pools of more than 128 devices: the split into slices, their generation and count, rewrite and shrink, and the
reading side (newest generation only) that the controller's decisions and the test invariants use."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from fake_drivers.controller.model import FabricDevice, node_copies
from fake_drivers.controller.objects import pool_slices
from fake_drivers.controller.settings import Settings
from fake_drivers.nodedriver.slices import devices_of, node_slices, node_template
from fake_drivers.pools import MAX_DEVICES_PER_SLICE, current_pools, part_name, pool_problem, split, write_pool

DRIVER = "gpu.example.com"


def entries(count: int, prefix: str = "dev") -> list[dict[str, Any]]:
    return [{"name": f"{prefix}-{i:04d}", "attributes": {"uuid": {"string": f"u-{prefix}-{i}"}}} for i in range(count)]


def names(slices: list[dict[str, Any]]) -> list[str]:
    return [d["name"] for s in slices for d in s["spec"]["devices"]]


@pytest.mark.parametrize(("count", "sizes"), [(0, [0]), (1, [1]), (128, [128]), (129, [128, 1]), (300, [128, 128, 44])])
def test_split_fills_slices_of_at_most_128_in_name_order(count: int, sizes: list[int]) -> None:
    devices = entries(count)
    parts = split(list(reversed(devices)))
    assert [len(p) for p in parts] == sizes
    assert [d["name"] for p in parts for d in p] == [d["name"] for d in devices]


def test_a_fabric_of_1000_devices_is_one_pool_in_8_slices_with_one_generation() -> None:
    devices = [FabricDevice(f"u{i}", f"fabric-0-gpu-{i}", "fabric-0", "gpu", {}, "free", None) for i in range(1000)]
    slices = pool_slices(Settings(driver=DRIVER), "fabric-0", devices, generation=5)
    assert len(slices) == 8 and all(len(s["spec"]["devices"]) <= MAX_DEVICES_PER_SLICE for s in slices)
    assert {(s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"]) for s in slices} == {(5, 8)}
    assert [s["metadata"]["name"] for s in slices] == [part_name("gpu-example-com-fabric-0", i) for i in range(8)]
    assert slices[0]["metadata"]["name"] == "gpu-example-com-fabric-0", "a small pool keeps its single-slice name"
    assert sorted(names(slices)) == sorted(d.name for d in devices), "every device exactly once"
    assert all(s["spec"]["nodeSelector"] == slices[0]["spec"]["nodeSelector"] for s in slices)
    assert all(s["metadata"]["labels"] == slices[0]["metadata"]["labels"] for s in slices)


def test_a_node_with_200_devices_is_one_pool_in_2_slices_on_that_node() -> None:
    slices = node_slices(DRIVER, "node-0", entries(200), generation=1)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 72]
    assert {s["spec"]["nodeName"] for s in slices} == {"node-0"}
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}


@dataclass
class FakeSlices:
    """resourceslices of a kube-apiserver, enough for write_pool: create, replace (resourceVersion), delete."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    version: int = 0

    def _store(self, body: dict[str, Any]) -> None:
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[body["metadata"]["name"]] = stored

    def create_cluster_custom_object(self, g: str, v: str, plural: str, body: dict[str, Any]) -> None:
        if body["metadata"]["name"] in self.objects:
            raise ApiException(status=409, reason="AlreadyExists")
        assert len(body["spec"]["devices"]) <= MAX_DEVICES_PER_SLICE, "the apiserver refuses more than 128"
        self.calls.append(("create", body["metadata"]["name"]))
        self._store(body)

    def replace_cluster_custom_object(self, g: str, v: str, plural: str, name: str, body: dict[str, Any]) -> None:
        if self.objects[name]["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            raise ApiException(status=409, reason="Conflict")
        assert len(body["spec"]["devices"]) <= MAX_DEVICES_PER_SLICE, "the apiserver refuses more than 128"
        self.calls.append(("replace", name))
        self._store(body)

    def delete_cluster_custom_object(self, g: str, v: str, plural: str, name: str) -> None:
        self.calls.append(("delete", name))
        if self.objects.pop(name, None) is None:
            raise ApiException(status=404, reason="NotFound")

    def published(self) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.objects.values()))

    def sync(self, devices: list[dict[str, Any]]) -> int | None:
        template = node_template(DRIVER, "node-0")
        return write_pool(self, self.published(), template, devices, devices_of)  # type: ignore[arg-type]


def pool_state(api: FakeSlices) -> tuple[set[tuple[int, int]], list[str]]:
    specs = [s["spec"] for s in api.objects.values()]
    return {(s["pool"]["generation"], s["pool"]["resourceSliceCount"]) for s in specs}, sorted(
        names(list(api.objects.values()))
    )


def test_write_pool_grows_rewrites_all_slices_with_the_next_generation_and_deletes_extras_when_it_shrinks() -> None:
    api = FakeSlices()
    assert api.sync(entries(300)) == 1
    assert pool_state(api) == ({(1, 3)}, [d["name"] for d in entries(300)])

    api.calls.clear()
    assert api.sync(entries(300)) is None and api.calls == [], "unchanged content: no write at all"

    # One device less at the front shifts every later device into the previous slice: all three are rewritten.
    assert api.sync(entries(300)[1:]) == 2
    assert pool_state(api) == ({(2, 3)}, [d["name"] for d in entries(300)[1:]])

    api.calls.clear()
    assert api.sync(entries(100)) == 3
    base = "gpu-example-com-node-0"
    assert api.calls == [("replace", base), ("delete", part_name(base, 1)), ("delete", part_name(base, 2))]
    assert pool_state(api) == ({(3, 1)}, [d["name"] for d in entries(100)])

    assert api.sync([]) == 4
    assert pool_state(api) == ({(4, 1)}, []), "an empty pool is still published, as one empty slice"


def test_an_empty_pool_read_back_as_null_is_current() -> None:
    """Kubernetes 1.34 returns an empty device list as `devices: null`: that is no change (was rewritten forever)."""
    api = FakeSlices()
    api.sync([])
    for body in api.objects.values():
        body["spec"]["devices"] = None
    api.calls.clear()
    assert api.sync([]) is None and api.calls == []


def test_write_pool_rewrites_a_half_written_pool_under_one_new_generation() -> None:
    api = FakeSlices()
    api.sync(entries(200))
    # As after a crash between two writes: slice 0 at generation 2, slice 1 still at generation 1.
    first = api.objects["gpu-example-com-node-0"]
    first["spec"]["pool"]["generation"] = 2
    assert api.sync(entries(200)) == 3
    assert pool_state(api)[0] == {(3, 2)}


def test_a_stale_resource_version_is_a_conflict_for_the_caller_to_retry() -> None:
    api = FakeSlices()
    api.sync(entries(10))
    stale = api.published()
    api.sync(entries(11))
    with pytest.raises(ApiException) as exc:
        write_pool(api, stale, node_template(DRIVER, "node-0"), entries(12), devices_of)  # type: ignore[arg-type]
    assert exc.value.status == 409


def test_readers_see_only_the_newest_generation_and_know_whether_it_is_complete() -> None:
    old = node_slices(DRIVER, "node-0", entries(300), generation=1)
    new = node_slices(DRIVER, "node-0", entries(200)[1:], generation=2)
    # Mid-rewrite: slice 0 already at generation 2, the others still at 1; device 128 moved into slice 0.
    pool = current_pools([new[0], old[1], old[2]])[(DRIVER, "node-0")]
    assert (pool.generation, pool.complete, len(pool.devices)) == (2, False, 128)
    # Both new slices written, the extra third slice not deleted yet: complete, and the stale slice ignored.
    done = current_pools([*new, old[2]])[(DRIVER, "node-0")]
    assert done.complete and sorted(d["name"] for d in done.devices) == [d["name"] for d in entries(200)[1:]]
    copies = node_copies([new[0], old[1], old[2]], DRIVER)
    assert len(copies) == len({c.name for c in copies}) == 128, "a device moved between slices counted twice"


def test_pool_problem_names_what_is_wrong_with_a_published_pool() -> None:
    slices = node_slices(DRIVER, "node-0", entries(300), generation=2)
    want = [d["name"] for d in entries(300)]
    assert pool_problem(slices, want) == ""
    assert "want 3 of one generation" in pool_problem(slices[:2], want)
    assert "want 3 of one generation" in pool_problem(
        [*slices[:2], node_slices(DRIVER, "node-0", entries(300), 1)[2]], want
    )
    assert "want 299" in pool_problem(slices, want[:299])
