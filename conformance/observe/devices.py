"""Physical devices of the implementation, leased to scenarios so that scenarios running side by side never
compete for the same device.

The pool is read from the implementation's published slices once it is ready. A device is one physical
identity (the profile's identityAttribute), whatever pool or name it shows up under: "fabric" if some copy
carries binding conditions (it is attached on demand), "local" if it only ever appears in a node's slice. A
scenario leases the identities it needs and asks for devices through a DeviceClass whose CEL selector matches
exactly those identities, so every copy of a leased device (fabric and hot-plugged node-local) stays its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import check_cancelled
from conformance.observe.slices import device_identity, reaches

Kind = Literal["fabric", "local"]
# How messages name a kind: "fabric" is any device some copy of which carries binding conditions, which for a node-local
# readiness gate (bindingModel node-local) is a node-local device; the words say what is known for every model.
KIND_WORDS: dict[str, str] = {"fabric": "with binding conditions", "local": "node-local without binding conditions"}
# Count-based pools lease nodes alone (faults by node): with the lifecycle scenarios run for two claim shapes, a
# scenario may wait for a node for minutes on a loaded machine (a wait, not a failure of the stack).
LEASE_WAIT_S = 480.0
MAX_CEL_BYTES = 10240  # DeviceClass spec.selectors[].cel.expression
# What a device went through, for a lease that asks for such a device on purpose (reuse: IMP-28). A scenario notes
# FAILED (its attach or readying failed) and MOVED (it went from one node to another); a release notes RELEASED.
FAILED, MOVED, RELEASED = "failed", "moved", "released"


@dataclass(frozen=True)
class PhysicalDevice:
    identity: str
    kind: Kind
    nodes: frozenset[str]  # fabric: the nodes its fabric copy reaches; local: the node it sits on
    copies: tuple[tuple[str, str], ...]  # (pool, device name) of every published copy


def read_devices(slices: list[dict[str, Any]], attribute: str, nodes: list[NodeSpec]) -> dict[str, PhysicalDevice]:
    """Group the published devices by physical identity; devices without the identity attribute are ignored."""
    domain, _, name = attribute.rpartition("/")
    found: dict[str, dict[str, Any]] = {}
    for s in slices:
        spec = s["spec"]
        for d in spec.get("devices") or []:
            attrs = d.get("attributes") or {}
            value = attrs.get(attribute) or (attrs.get(name) if domain in ("", spec["driver"]) else None)
            if not value:
                continue
            ident = str(next(iter(value.values())))
            entry = found.setdefault(ident, {"fabric": set(), "local": set(), "copies": [], "conditions": False})
            entry["copies"].append((spec["pool"]["name"], d["name"]))
            if d.get("bindingConditions"):
                entry["conditions"] = True
                entry["fabric"] |= {n.name for n in nodes if reaches(s, n.name, n.labels)}
            else:
                entry["local"] |= {n.name for n in nodes if reaches(s, n.name, n.labels)}
    return {
        ident: PhysicalDevice(
            ident,
            "fabric" if e["conditions"] else "local",
            frozenset(e["fabric"] if e["conditions"] else e["local"]),
            tuple(sorted(e["copies"])),
        )
        for ident, e in found.items()
    }


def incomplete_pools(slices: list[dict[str, Any]]) -> list[str]:
    """Pools whose newest generation does not have all its slices yet (resourceSliceCount), e.g. while a driver
    is still publishing them."""
    newest: dict[str, tuple[int, int, int]] = {}  # pool -> (generation, slices seen, slices expected)
    for s in slices:
        pool = s["spec"]["pool"]
        generation, expected = int(pool.get("generation", 0)), int(pool.get("resourceSliceCount", 1))
        current = newest.get(pool["name"], (-1, 0, 0))
        if generation > current[0]:
            newest[pool["name"]] = (generation, 1, expected)
        elif generation == current[0]:
            newest[pool["name"]] = (generation, current[1] + 1, expected)
    return sorted(name for name, (_, seen, expected) in newest.items() if seen < expected)


@dataclass(frozen=True)
class CountedPool:
    """Count-based fabric entries of one model in one pool: interchangeable capacity, no physical identity."""

    pool: str
    model: str
    entries: int  # entries published when read (the free capacity then)
    nodes: frozenset[str]  # nodes the pool reaches


def read_counted(
    slices: list[dict[str, Any]], driver: str, model_attribute: str, identity_attribute: str, nodes: list[NodeSpec]
) -> dict[tuple[str, str], CountedPool]:
    """(pool, model) -> the count-based fabric entries: devices with binding conditions, the model attribute and no
    identity attribute, in pools without nodeName."""
    found: dict[tuple[str, str], tuple[int, set[str]]] = {}
    for s in slices:
        spec = s["spec"]
        if spec.get("nodeName"):
            continue
        for d in spec.get("devices") or []:
            model = device_identity(d, model_attribute, driver)
            if not d.get("bindingConditions") or not model or device_identity(d, identity_attribute, driver):
                continue
            key = (spec["pool"]["name"], model)
            count, reach = found.get(key, (0, set()))
            found[key] = (count + 1, reach | {n.name for n in nodes if reaches(s, n.name, n.labels)})
    return {k: CountedPool(k[0], k[1], count, frozenset(reach)) for k, (count, reach) in found.items()}


@dataclass
class Lease:
    holder: str
    devices: list[PhysicalDevice]
    counted: CountedPool | None = None  # count-based: `count` entries of this pool's model, no identity known
    count: int = 0
    node: str | None = None  # the node the lease was taken for
    exclusive: bool = False  # the node is the holder's alone (faults selected by node touch no other scenario)
    past: dict[str, str] = field(default_factory=dict)  # identity -> what it went through, if leased for that

    @property
    def identities(self) -> list[str]:
        return [d.identity for d in self.devices]


@dataclass
class DevicePool:
    """Hands out physical devices to scenarios; a scenario waits (with a deadline) while others hold them."""

    driver: str
    attribute: str
    devices: dict[str, PhysicalDevice]
    counted: dict[tuple[str, str], CountedPool] = field(default_factory=dict)  # count-based fabric entries
    model_attribute: str = "model"
    _held: dict[str, str] = field(default_factory=dict)  # identity -> holder
    _capacity_held: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)  # (pool, model) -> holders
    _node_holders: dict[str, set[str]] = field(default_factory=dict)  # node -> holders of counted leases there
    _exclusive: dict[str, str] = field(default_factory=dict)  # node -> the holder that has it alone
    _used: dict[str, float] = field(default_factory=dict)  # identity -> last release (prefer rested devices)
    _past: dict[str, dict[str, float]] = field(default_factory=dict)  # identity -> FAILED/MOVED/RELEASED -> when
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def selector(self, identities: Iterable[str]) -> str:
        """CEL matching every copy of these physical devices of the driver, and nothing else.

        The apiserver takes at most MAX_CEL_BYTES per expression, about 250 identities. A larger set is written
        as "none of the other known identities", which selects the same devices as long as the implementation
        publishes no new identity meanwhile.
        """
        domain, _, name = self.attribute.rpartition("/")
        domain = domain or self.driver
        attrs = f"device.attributes[{json.dumps(domain)}]"
        head = f"device.driver == {json.dumps(self.driver)} && {json.dumps(name)} in {attrs} && "
        chosen = set(identities)
        expression = head + f"{attrs}.{name} in {json.dumps(sorted(chosen))}"
        if len(expression) <= MAX_CEL_BYTES:
            return expression
        others = sorted(set(self.devices) - chosen)
        expression = head + f"!({attrs}.{name} in {json.dumps(others)})"
        if len(expression) > MAX_CEL_BYTES:
            raise ValueError(f"no CEL selector under {MAX_CEL_BYTES} bytes picks {len(chosen)} of {len(self.devices)}")
        return expression

    def refresh(self, slices: list[dict[str, Any]], nodes: list[NodeSpec], counted: bool = False) -> None:
        """Re-read reach and devices from the slices and nodes as they are now (an implementation may label nodes
        or publish pools at run time). A device known as fabric stays fabric while only its node-local copy is
        published (attached, under reschedule-to-local); one no longer published is kept (it may be in use); a
        node-local device first seen now is a hot-plugged copy (count-based entries name no identity), not local
        hardware. The first read (session/scenarios.py) takes the node-local devices as they are."""
        current = read_devices(slices, self.attribute, nodes)
        with self._cond:
            merged = dict(self.devices)  # replaced whole: other threads iterate the old one meanwhile
            for ident, device in current.items():
                known = merged.get(ident)
                if known is None and device.kind == "local":
                    continue  # a node-local copy that appeared at run time is a hot-plugged fabric device
                if not (known is not None and known.kind == "fabric" and device.kind == "local"):
                    merged[ident] = device
            self.devices = merged
            if counted:  # reach follows the live nodes; the capacity stays as first read (entries shrink as used)
                now = read_counted(slices, self.driver, self.model_attribute, self.attribute, nodes)
                self.counted = {
                    k: CountedPool(
                        k[0], k[1], max(c.entries, self.counted[k].entries if k in self.counted else 0), c.nodes
                    )
                    for k, c in now.items()
                } | {k: c for k, c in self.counted.items() if k not in now}
            self._cond.notify_all()

    def count(self, kind: Kind, node: str | None = None) -> int:
        if kind == "fabric" and self.counted:
            return sum(c.entries for c in self.counted.values() if node is None or node in c.nodes)
        return len(self._matching(kind, node))

    def _matching(self, kind: Kind, node: str | None) -> list[PhysicalDevice]:
        return [d for d in self.devices.values() if d.kind == kind and (node is None or node in d.nodes)]

    def model_selector(self, model: str) -> str:
        """CEL matching every entry and copy of one model of the driver: the count entries and the node-local copies
        a claim is moved to (they carry the model too)."""
        domain, _, name = self.model_attribute.rpartition("/")
        attrs = f"device.attributes[{json.dumps(domain or self.driver)}]"
        head = f"device.driver == {json.dumps(self.driver)} && {json.dumps(name)} in {attrs}"
        return f"{head} && {attrs}.{name} == {json.dumps(model)}"

    def lease_counted(
        self,
        holder: str,
        count: int,
        nodes: list[str],
        *,
        exclusive: bool = False,
        timeout: float = LEASE_WAIT_S,
        model: str | None = None,
    ) -> Lease:
        """`count` entries of one model's capacity in a pool reaching one of `nodes` (the first that has room; of
        `model` if given, else the pool with the most entries first: a model with few devices stays for the scenario
        that asks for it). `exclusive`: no other scenario leases on that node meanwhile (a fault selected by node must
        hit this scenario's attaches only)."""
        pools = sorted(self.counted.values(), key=lambda c: (-c.entries, c.pool, c.model))
        reach = {n: [c for c in pools if n in c.nodes and model in (None, c.model)] for n in nodes}
        if not nodes or max(sum(c.entries for c in pools) for pools in reach.values()) < count:
            pytest.skip(f"needs {count} count entries of {self.driver} reaching one of {nodes}")
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for node, pools in reach.items():
                    others = self._node_holders.get(node, set()) - {holder}
                    if self._exclusive.get(node, holder) != holder or (exclusive and others):
                        continue
                    for c in pools:
                        held = sum(self._capacity_held.get((c.pool, c.model), {}).values())
                        if c.entries - held >= count:
                            self._capacity_held.setdefault((c.pool, c.model), {})[holder] = count
                            self._node_holders.setdefault(node, set()).add(holder)
                            if exclusive:
                                self._exclusive[node] = holder
                            return Lease(holder, [], c, count, node, exclusive)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{holder}: {count} count entries reaching {nodes} not available within {timeout:g}s "
                        f"(nodes held alone: {self._exclusive}; holders: {self._node_holders})"
                    )
                check_cancelled()
                self._cond.wait(min(left, 1.0))

    def note(self, identity: str, event: str) -> None:
        """Remember what a device went through (FAILED, MOVED), for a later lease that prefers such a device."""
        with self._cond:
            self._past.setdefault(identity, {})[event] = time.monotonic()

    def _order(self, free: list[PhysicalDevice], prefer: tuple[str, ...]) -> list[tuple[PhysicalDevice, str]]:
        """The free devices in the order a lease takes them: for each event of `prefer`, the device that went through
        it last (one each), then the others, rested ones (released longest ago, or never used) first."""
        rested = sorted(free, key=lambda d: (self._used.get(d.identity, 0.0), d.identity))
        first: list[tuple[PhysicalDevice, str]] = []
        for event in prefer:
            had = [d for d in rested if event in self._past.get(d.identity, {}) and d not in (f for f, _ in first)]
            if had:
                first.append((max(had, key=lambda d: self._past[d.identity][event]), event))
        taken = {d.identity for d, _ in first}
        return first + [(d, "") for d in rested if d.identity not in taken]

    def lease(
        self,
        holder: str,
        count: int,
        kind: Kind = "fabric",
        node: str | None = None,
        timeout: float = LEASE_WAIT_S,
        prefer: tuple[str, ...] = (),
    ) -> Lease:
        """`count` devices of `kind` (reaching `node`, if given). Skips the scenario when the implementation does
        not publish that many at all; fails when other scenarios hold them for longer than `timeout`. `prefer`: reuse
        on purpose, one device that went through each of these (FAILED, MOVED, RELEASED), the latest, if free."""
        where = f" reaching {node}" if node else ""
        total = len(self._matching(kind, node))
        if total < count:
            pytest.skip(
                f"needs {count} devices {KIND_WORDS[kind]} of {self.driver}{where}; the implementation publishes "
                f"{total}"
            )
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                free = [d for d in self._matching(kind, node) if d.identity not in self._held]
                if len(free) >= count:
                    chosen = self._order(free, prefer)[:count]
                    for d, _ in chosen:
                        self._held[d.identity] = holder
                    return Lease(holder, [d for d, _ in chosen], past={d.identity: e for d, e in chosen if e})
                left = deadline - time.monotonic()
                if left <= 0:
                    holders = sorted(set(self._held.values()))
                    raise AssertionError(
                        f"{holder}: {count} free devices {KIND_WORDS[kind]}{where} not available within {timeout:g}s "
                        f"({len(free)} free of {total}; held by {holders})"
                    )
                check_cancelled()
                self._cond.wait(min(left, 1.0))

    def release(self, lease: Lease) -> None:
        with self._cond:
            if lease.counted is not None:
                self._capacity_held.get((lease.counted.pool, lease.counted.model), {}).pop(lease.holder, None)
                if lease.node:
                    self._node_holders.get(lease.node, set()).discard(lease.holder)
                    if self._exclusive.get(lease.node) == lease.holder:
                        del self._exclusive[lease.node]
            now = time.monotonic()
            for d in lease.devices:
                if self._held.get(d.identity) == lease.holder:
                    del self._held[d.identity]
                    self._used[d.identity] = now
                    self._past.setdefault(d.identity, {})[RELEASED] = now
            self._cond.notify_all()


def fabric_only_nodes(pool: DevicePool, nodes: Iterable[NodeSpec], fabric_devices: int = 1) -> list[str]:
    """Nodes without node-local devices of the driver that at least `fabric_devices` fabric devices reach."""
    local = {n for d in pool.devices.values() if d.kind == "local" for n in d.nodes}
    return [s.name for s in nodes if s.name not in local and pool.count("fabric", s.name) >= fabric_devices]
