"""Claim shapes of the lifecycle scenarios: one device, or `devicesPerClaim` devices over two requests.

A lifecycle scenario (IMP-5, IMP-13..16) is written once, for a `Shape`, and registered twice by `shaped_scenario`:
`<name>` with a claim of one device, `<name>-multi` (where the profile claims multiDeviceClaims) with one claim of N
devices over two requests (`gpu-a`, `gpu-b`). Its tests read both through `shaped_fixture` (parametrized `[one]`,
`[multi]`), so each check is written once and judges every device of the claim on its own.

Identified entries: two leases of devices reaching one node without node-local devices, one DeviceClass each.
Count-based entries: capacity of one model on a node the scenario has to itself (what the fabric attaches there
is the scenario's), one class of the model for both requests.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import pytest

from conformance.cluster.manifests import requests_claim_template
from conformance.observe.devices import Lease
from conformance.observe.views import History
from conformance.suite.implementation.context import Context
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.phases import register_fixture
from conformance.suite.record import REGISTRY, scenario
from conformance.suite.runner import ScenarioFailed

Shape = Literal["one", "multi"]
SHAPES: tuple[Shape, ...] = ("one", "multi")
MULTI = "multiDeviceClaims"
T = TypeVar("T")


@dataclass
class Claimed:
    """The scenario's claim template (`gpu`, in a fresh namespace) and what it was leased."""

    node: str
    leases: list[Lease]
    ns: str
    requests: dict[str, int]  # request name -> devices asked

    @property
    def count(self) -> int:
        return sum(self.requests.values())

    @property
    def identities(self) -> list[str]:
        """Leased physical devices (identified entries; none for count-based leases)."""
        return [i for lease in self.leases for i in lease.identities]

    @property
    def lease(self) -> Lease:
        """The lease a count-based let-go is judged on (its node): the first."""
        return self.leases[0]


def bound_devices(ctx: Context, claimed: Claimed, history: History, label: str = "") -> tuple[Outcome, list[str]]:
    """Wait for the claim's pod to bind (its attaches may run one after another) and name every device it ended with:
    the node-local copies' (reschedule-to-local, counted entries), else the leased ones; fails when fewer than the
    claim asked for have a physical identity."""
    extra = (claimed.count - 1) * ctx.profile.promises.attach_s
    bound = follow(ctx, history, claimed.node, timeout=bind_timeout(ctx.profile, extra))
    found = sorted({i for i in bound.final_identities() if i})
    if len(found) < claimed.count:
        found = sorted(set(found) | set(claimed.identities))
    if len(found) < claimed.count:
        raise AssertionError(
            f"{label}{claimed.count} devices asked, {len(found)} with a physical identity in any slice:\n"
            f"  {bound.describe()}"
        )
    return bound, found


def claim_size(ctx: Context, spare: int = 0) -> tuple[int, list[str]]:
    """N (the profile's devicesPerClaim, bounded by the fabric devices reaching one fabric-only node, less `spare`)
    and the fabric-only nodes that many reach. Reach is owed (Context.reach_owed): waited for up to the promise, then
    failed naming the pools and the labels nodes lack; skipped only when every pool reaches its nodes and still no
    node is reached by two plus the spares (the fabric's shape)."""
    wanted = ctx.profile.devices_per_claim

    def found() -> tuple[int, list[str]] | None:
        for n in range(wanted, 1, -1):
            if nodes := ctx.fabric_only_nodes(n + spare):
                return n, nodes
        return None

    def shape() -> str:
        most = max((ctx.pool.count("fabric", n.name) for n in ctx.nodes()), default=0)
        return f"at most {most} fabric devices reach one node ({ctx.reach_cause()})"

    what = f"a node without node-local {ctx.profile.driver} devices reached by {2 + spare} fabric devices"
    return ctx.reach_owed(what, found, shape)


def shaped_claim(
    ctx: Context, shape: Shape, *, exclusive: bool = False, node: str | None = None, part: str = ""
) -> Claimed:
    """A claim template `gpu` of the shape for a node without node-local devices (or `node`), in a fresh namespace.
    `exclusive`: count-based capacity on a node of the scenario's own (faults selected by node)."""
    ns_prefix = f"{ctx.scenario.name}-{part}" if part else None
    if shape == "one" and node is None:
        found, lease, ns = ctx.remote_fabric(exclusive=exclusive, part=part)
        return Claimed(found, [lease], ns, {"dev": 1})
    if shape == "one":
        assert node is not None
        lease = ctx.lease(1, "fabric", node, exclusive=exclusive, part=part)
        leases, classes, requests = [lease], [ctx.device_class(lease)], {"dev": 1}
    else:
        if node is None:
            n, nodes = claim_size(ctx)
        else:  # a node of the scenario's own: as many as reach it, at least two
            ctx.refresh()
            n, nodes = max(2, min(ctx.profile.devices_per_claim, ctx.pool.count("fabric", node))), [node]
        first = n // 2
        requests = {"gpu-a": first, "gpu-b": n - first}
        if ctx.counted:  # capacity of one model: one class of the model for both requests
            lease = ctx.lease(n, "fabric", nodes, exclusive=exclusive or ctx.counted, part=part)
            node = lease.node or nodes[0]
            klass = ctx.device_class(lease)
            leases, classes = [lease], [klass, klass]
        else:
            node = nodes[0]
            leases = [ctx.lease(first, "fabric", node, part=part), ctx.lease(n - first, "fabric", node, part=part)]
            classes = [ctx.device_class(lease) for lease in leases]
    ns = ctx.namespace(ns_prefix)
    template = [(name, klass, count) for (name, count), klass in zip(requests.items(), classes, strict=True)]
    ctx.objects.create(requests_claim_template("gpu", template), ns)
    assert node is not None
    return Claimed(node, leases, ns, requests)


def shaped_scenario(
    name: str, description: str, requirements: tuple[str, ...], **kw: Any
) -> Callable[[Callable[[Context, Shape], T]], Callable[[Context, Shape], T]]:
    """Register `fn(ctx, shape)` as scenario `name` (a claim of one device) and `name-multi` (a claim of
    devicesPerClaim devices over two requests; needs the capability multiDeviceClaims)."""

    base = tuple(kw.pop("capabilities", ()))

    def register(fn: Callable[[Context, Shape], T]) -> Callable[[Context, Shape], T]:
        for shape in SHAPES:

            def run(ctx: Context, shape: Shape = shape) -> T:
                return fn(ctx, shape)

            run.__module__ = fn.__module__
            caps = base + ((MULTI,) if shape == "multi" else ())
            words = description if shape == "one" else f"{description} (a claim of several devices, two requests)"
            scenario(shaped_name(name, shape), words, requirements, capabilities=caps, **kw)(run)
        return fn

    return register


def shaped_name(name: str, shape: Shape) -> str:
    return name if shape == "one" else f"{name}-multi"


def shaped_fixture(fixture: str, name: str) -> Any:
    """A module fixture `fixture`, parametrized over the claim shapes, handing each test the observation of
    `name` or `name-multi` (a skip of the scenario skips that test; a failure fails it: see result_fixture)."""
    caller = sys._getframe(1).f_globals.get("__name__", "")
    register_fixture(caller, fixture, tuple(shaped_name(name, shape) for shape in SHAPES))  # the phase of its tests

    @pytest.fixture(scope="module", name=fixture, params=SHAPES)
    def observed(request: pytest.FixtureRequest) -> Any:
        wanted = shaped_name(name, request.param)
        runner = request.getfixturevalue("scenarios")
        assert REGISTRY[wanted].implementation
        try:
            return runner.result(wanted)
        except Exception as exc:  # skips and interrupts are BaseExceptions: they pass through
            return ScenarioFailed(exc)

    return observed
