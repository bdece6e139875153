"""--hotplug-delay: a hot-plugged device is advertised only once it has been attached to the same node that long."""

from __future__ import annotations

from fake_drivers.nodedriver.cli import HotplugDelay
from fake_drivers.nodedriver.slices import AttachedDevice


def _dev(node: str = "node-0") -> AttachedDevice:
    return AttachedDevice("fabric-0-gpu-0", "uuid-0", "gpu", {}, node=node)


def test_no_delay_advertises_at_once() -> None:
    assert HotplugDelay().ready([_dev()], 0.0) == [_dev()]


def test_a_device_is_advertised_after_the_delay_and_a_move_or_detach_starts_it_again() -> None:
    delay = HotplugDelay(15.0)
    assert delay.ready([_dev()], 100.0) == []
    assert delay.ready([_dev()], 114.9) == []
    assert delay.ready([_dev()], 115.0) == [_dev()]
    assert delay.ready([_dev("node-1")], 116.0) == [], "attached elsewhere: a new hot-plug"
    assert delay.ready([], 117.0) == []
    assert delay.ready([_dev("node-1")], 118.0) == [], "detached in between: counted from the new attach"
