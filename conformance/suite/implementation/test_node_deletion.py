"""IMP-16 (SHOULD): a node deleted while a fabric device is attached to it, its pod bound there and running: the
device is detached (the fabric probe no longer lists it) and offered again (a free fabric entry, for good), within
detachSeconds of the moment the control plane released the claim; nothing stays published for the node.

A node of its own: the scenario adds a Node for a machine the fabric reaches that is no node of the cluster (the
probe's `free[].nodes` name the machines each fabric reaches), with the labels of a live node of the same fabric (so
the implementation's pools reach it as they reach that one) and a NoSchedule taint only its pod tolerates (no other
scenario's pod lands there: they read live, untainted nodes). The pod binds there through the implementation, then
the Node is deleted. The cluster ends as it was: the node is gone again (also on failure: the object tracker deletes
it). Creating nodes needs a cluster the suite owns: the local provider (kwok plays every node's kubelet); elsewhere
the profile must claim `nodeLifecycle` (its cluster makes a Node the suite creates Ready, e.g. kwok), else skipped.

What releases the claim is the control plane, not the implementation. In a cluster, kube-controller-manager's pod
garbage collector force-deletes (grace 0) a pod whose node is gone, then the resourceclaim controller deallocates and
deletes the pod's claim at once. The collector runs every 20 s and waits a 40 s quarantine first (podgc's
gcCheckPeriod and quarantineTime, fixed in its code): 42-90 s here, the longest wait of the suite, and no part of the
KEP. So once the Node is gone the suite does what the collector would do, at once: it force-deletes the pod, and the
resourceclaim controller releases the claim (RELEASE_BOUND_S). The implementation sees what it sees in a cluster, a
claim released after its node was deleted, in the same order. Its promise (detachSeconds) counts from that release,
as IMP-5's counts from the suite's own deletion. A stack may detach earlier (the node is gone); IMP-10 ends a pod's
use at its node's deletion for that reason (observe/attachments.py).

What fails it: a stack that never detaches a device from a node that is gone (its detach needs the node's agent, or it
waits for a node that never comes back: `--broken-keep-on-deleted-node`), one that detaches but never offers the
device again, one that keeps offering the node's hot-plugged copy on a slice of the deleted node (two free entries).
Judged the same under every binding model: the device is the one the pod ended with (the fabric copy, or the
node-local copy's physical device under reschedule-to-local and counted entries). Both claim shapes (shape.py) at
once, on the one node of its own: a pod with a claim of one device and, where the profile claims multiDeviceClaims, a
pod with a claim of `devicesPerClaim` devices over two requests; every device of both is judged on its own.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.nodes import fake_node, wait_nodes_ready
from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.observe.slices import allocation_results
from conformance.observe.views import History
from conformance.suite.implementation.settle import LetGo, let_go
from conformance.suite.implementation.shape import MULTI, Shape, bound_devices, shaped_claim
from conformance.suite.scenario import Context, reads_capability, result_fixture, scenario

RELEASE_BOUND_S = 30.0  # the resourceclaim controller's deallocation and the watches' delivery on a loaded machine
NODE_GONE_S = 30.0
NODE_READY_S = 60.0
REACH_S = 30.0  # for the implementation's pools to reach the added node
TAINT_KEY = "conformance.dra.example.com/scenario"
TAINT = {"key": TAINT_KEY, "value": "node-deleted", "effect": "NoSchedule"}
CAPABILITY = reads_capability("nodeLifecycle")


@dataclass
class NodeGone:
    node: str
    sibling: str  # the live node of the same fabric whose labels it got
    identities: dict[str, list[str]] = field(default_factory=dict)  # claim shape -> devices its pod ended with
    bound: list[str] = field(default_factory=list)  # problems of the bindings before the node was deleted
    attached_before: dict[str, tuple[str, str] | None] = field(default_factory=dict)  # the probe, right before
    released_after_s: float | None = None  # node deleted -> the claims released by the control plane
    let_go: LetGo | None = None
    left: list[str] = field(default_factory=list)  # slices of the driver still naming the node at the end

    @property
    def devices(self) -> list[str]:
        return sorted({d for found in self.identities.values() for d in found})


def _spare_machine(ctx: Context) -> tuple[str, NodeSpec]:
    """A machine a fabric reaches that is no node of the cluster, and a live node of the same fabric that the
    implementation's fabric pools reach (owed: waited for, then failed naming the pools and the labels nodes lack);
    skipped when the probe names no such machine."""
    probe = ctx.probe
    assert probe is not None
    latest = probe.latest()
    existing = {n["metadata"]["name"] for n in ctx.record.live("node")}
    candidates: list[tuple[str, list[str]]] = []
    for fabric in sorted(latest[2] if latest else [], key=lambda f: str(f.get("fabric"))):
        reached = sorted(str(n) for n in fabric.get("nodes") or ())
        spare = [n for n in reached if n not in existing]
        if spare:
            candidates.append((spare[0], [n for n in reached if n in existing]))
    if not any(siblings for _, siblings in candidates):
        pytest.skip(
            "the fabric probe names no machine of a fabric that is no node of the cluster yet (free[].nodes), next to "
            "a live node of that fabric: no node of its own can be added that the implementation's fabric reaches"
        )

    def served() -> tuple[str, NodeSpec] | None:  # a sibling the pools reach, with the labels it has now
        ctx.refresh()
        live = {n.name: n for n in ctx.nodes()}
        for spare, siblings in candidates:
            for name in siblings:
                if name in live and ctx.pool.count("fabric", name):
                    return spare, live[name]
        return None

    names = sorted({n for _, siblings in candidates for n in siblings})
    return ctx.reach_owed(
        f"a fabric pool of {ctx.profile.driver} reaching one of {names} (the live nodes of a fabric with a spare "
        "machine)",
        served,
        ctx.reach_cause,
    )


def _wait_node_gone(ctx: Context, node: str) -> None:
    """Pod GC acts on a pod whose Node object is gone, not on one being deleted (finalizers): followed in the
    run-wide record, whose node watch delivers the deletion once the object is removed."""

    def live() -> list[str]:
        return [n["metadata"]["name"] for n in ctx.record.live("node")]

    wait_for(
        live,
        lambda names: node not in names,
        timeout=NODE_GONE_S,
        expected=f"node {node} gone after its deletion",
        max_interval=0.5,
    )


def _released(history: History, since: float) -> float | None:
    """When the record first showed every claim of the namespace deallocated or deleted after `since` (None: not
    yet)."""
    claims: dict[str, bool] = {}  # claim -> allocated, as of each change in order
    for e in history.events("claim"):
        claims[e.name] = not e.deleted and bool(allocation_results(e.obj))
        if e.at >= since and not any(claims.values()):
            return e.at
    return None


@scenario(
    "node-deleted",
    "a node is deleted while a fabric device is attached to it: the device is detached and offered again",
    ("IMP-16",),
    probe=True,
    remote=False,  # a node of its own
)
def node_deleted(ctx: Context) -> NodeGone:
    provider = ctx.cluster.info.provider
    if provider != "local" and not ctx.profile.capabilities.get(CAPABILITY):
        pytest.skip(
            f"the suite adds and deletes nodes only in a cluster it owns (provider local, kwok): on {provider} the "
            f"profile must claim the capability {CAPABILITY} (a Node the suite creates becomes Ready, e.g. kwok)"
        )
    node, sibling = _spare_machine(ctx)
    labels = {k: v for k, v in sibling.labels.items() if k != "kubernetes.io/hostname"}
    manifest = fake_node(NodeSpec(node, labels))
    manifest["spec"]["taints"] = [TAINT]
    ctx.objects.create(manifest)  # deleted again by the tracker if the scenario ends before it deletes it
    wait_nodes_ready(ctx.cluster.core, [node], NODE_READY_S)
    ctx.own_nodes.append(node)
    seen = NodeGone(node, sibling.name)
    ctx.say(f"added node {node} (labels of {sibling.name}, tainted {TAINT_KEY})")

    def reach() -> int:  # a stack may label a node that joins before its pools reach it
        ctx.refresh()
        return ctx.pool.count("fabric", node)

    try:
        wait_for(
            reach,
            bool,
            timeout=REACH_S,
            expected=f"a fabric pool of {ctx.profile.driver} reaching {node}",
            max_interval=0.5,
        )
    except WaitTimeout:
        pytest.skip(
            f"no fabric pool of {ctx.profile.driver} reaches {node}, added with the labels of {sibling.name} (which "
            f"they reach), within {REACH_S:g}s: the implementation does not serve a node that joins at run time"
        )
    shapes: list[Shape] = ["one", "multi"] if ctx.profile.capabilities.get(MULTI) else ["one"]
    # One holder on the node (tainted: only this scenario's pods land there), so no part: count-based, both claims
    # are capacity of one model on it.
    claims = {shape: shaped_claim(ctx, shape, exclusive=ctx.counted, node=node) for shape in shapes}
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    with ExitStack() as stack:
        histories = {shape: stack.enter_context(ctx.history(c.ns)) for shape, c in claims.items()}
        for c in claims.values():
            pod = pinned_pod("app", "gpu", node)
            pod["spec"]["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
            ctx.objects.create(pod, c.ns)
        for shape, c in claims.items():
            bound, found = bound_devices(ctx, c, histories[shape], f"[{shape}] ")
            seen.bound += [f"[{shape}] {p}" for p in bound.binding_problems()]
            seen.identities[shape] = found
        now = probe.now()
        seen.attached_before = {d: now.get(d) for d in seen.devices}

        deleted = time.time()
        ctx.cluster.core.delete_node(node)
        _wait_node_gone(ctx, node)
        for c in claims.values():  # what pod GC does 40-90 s later
            ctx.cluster.core.delete_namespaced_pod("app", c.ns, grace_period_seconds=0)
        ctx.say(f"deleted node {node} with {seen.devices} attached, then its pods (as pod GC would); waiting")
        try:
            released = max(
                wait_for(
                    lambda history=history: _released(history, deleted),
                    lambda at: at is not None,
                    timeout=RELEASE_BOUND_S,
                    expected=f"the claim of the pod on the deleted node {node} released (the pod force-deleted as "
                    "pod garbage collection does, then the resourceclaim controller)",
                    describe=lambda _, history=history: history.describe(),
                    max_interval=0.5,
                )
                for history in histories.values()
            )
        except WaitTimeout as exc:
            pytest.skip(f"the control plane did not release the claim within {RELEASE_BOUND_S:g}s: not judged\n{exc}")
    assert released is not None
    seen.released_after_s = round(released - deleted, 3)
    ctx.measure("node_deleted_to_released_seconds", seen.released_after_s)
    since = time.monotonic() - (time.time() - released)  # the release, on let_go's clock
    seen.let_go = let_go(ctx, seen.devices, claims["one"].lease, since, ctx.profile.promises.detach_s)
    assert ctx.invariants is not None
    watcher = ctx.invariants

    def left() -> list[str]:
        return [
            f"{s['metadata']['name']} ({len(s['spec'].get('devices') or [])} devices)"
            for s in watcher.driver_slices()
            if s["spec"].get("nodeName") == node
        ]

    try:
        wait_for(
            left,
            lambda found: not found,
            timeout=max(1.0, since + ctx.profile.promises.detach_s - time.monotonic()),
            expected=f"no slice of {ctx.profile.driver} naming the deleted node {node}",
            max_interval=0.5,
        )
    except WaitTimeout:
        seen.left = left()
    return seen


gone = result_fixture("gone", "node-deleted")


@pytest.mark.requirement("IMP-16")
def test_a_device_on_a_deleted_node_is_detached_and_offered_again(gone: NodeGone) -> None:
    assert not gone.bound, "before the node was deleted:\n" + "\n".join(gone.bound)
    away = {d: s for d, s in gone.attached_before.items() if s != (gone.node, "attached")}
    assert not away, f"right before {gone.node} was deleted the probe said {away}"
    assert gone.let_go is not None
    problem = gone.let_go.problem()
    assert not problem, (
        f"{gone.node} deleted with {gone.identities} (claim shape -> devices) attached; the control plane released "
        f"the claims {gone.released_after_s}s later; then: {problem}"
    )


@pytest.mark.requirement("IMP-16")
def test_nothing_stays_published_for_the_deleted_node(gone: NodeGone) -> None:
    assert not gone.left, (
        f"slices of the driver still name {gone.node}, deleted, detachSeconds after the release: {gone.left}"
    )
