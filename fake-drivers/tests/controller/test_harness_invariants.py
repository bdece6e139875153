"""The invariant observation of the cluster tests on multi-slice pools (a fake API: no cluster needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller_harness import fabric_pool, observe_invariants

from fake_drivers.controller.model import FabricDevice
from fake_drivers.controller.objects import pool_slices
from fake_drivers.controller.settings import Settings
from fake_drivers.nodedriver.slices import node_slices

DRIVER = "gpu.example.com"
SETTINGS = Settings(driver=DRIVER)


@dataclass
class FakeLists:
    """Answers the three LISTs an observation makes: claims, the driver's slices, taint rules."""

    slices: list[dict[str, Any]]

    def list_cluster_custom_object(self, g: str, v: str, plural: str, **_: Any) -> dict[str, Any]:
        return {"items": self.slices if plural == "resourceslices" else []}


def fabric(count: int, skip: int = 0) -> list[FabricDevice]:
    return [FabricDevice(f"u{i}", f"f0-gpu-{i:03d}", "f0", "gpu", {}, "free", None) for i in range(skip, count)]


def test_a_device_moving_between_slices_of_a_pool_being_rewritten_is_not_offered_twice() -> None:
    old = pool_slices(SETTINGS, "f0", fabric(300), generation=1)
    new = pool_slices(SETTINGS, "f0", fabric(300, skip=1), generation=2)
    # Slice 0 rewritten (it now holds device 128, which slice 1 of generation 1 still lists), the rest not yet.
    seen = observe_invariants(FakeLists([new[0], old[1], old[2]]), DRIVER, {})  # type: ignore[arg-type]
    assert seen["offered_twice"] == {}


def test_a_device_offered_by_the_fabric_pool_and_a_node_pool_is_still_caught() -> None:
    pool = pool_slices(SETTINGS, "f0", fabric(200), generation=1)
    copy = next(d for d in pool[1]["spec"]["devices"])
    local = node_slices(DRIVER, "node-0", [copy], generation=1)
    seen = observe_invariants(FakeLists([*pool, *local]), DRIVER, {})  # type: ignore[arg-type]
    assert seen["offered_twice"] == {copy["attributes"]["uuid"]["string"]: 2}


def test_fabric_pool_merges_the_slices_and_waits_for_a_complete_pool() -> None:
    pool = pool_slices(SETTINGS, "f0", fabric(300), generation=4)
    merged = fabric_pool(FakeLists(pool), DRIVER, "f0")  # type: ignore[arg-type]
    assert merged is not None and len(merged["spec"]["devices"]) == 300
    assert fabric_pool(FakeLists(pool[:2]), DRIVER, "f0") is None  # type: ignore[arg-type]
