"""IMP-19 device mobility: a device used on node A, released, then asked for by a pod pinned to node B of the same
fabric — what a composable fabric is for.

One leased physical device X that reaches two nodes: a pod pinned to A binds with it (judged as attach-before-bind),
then pod and claim are deleted and at once a pod pinned to B asks for X alone (a DeviceClass over X's identity, so
every copy of it and nothing else). Whatever the stack does meanwhile (keep X attached to A for reuse, hide and
detach it first, move it on demand), the fabric must show X leave A — free, or detaching from A — before any answer
lists it on B; no condition of B's allocation may be True before the fabric says X is attached to B; and the pod on B
binds with X attached to B. Then X is let go as usual.

Per binding model: keep-in-pool offers X while it idles on A, so B's claim is allocated X while X is still attached
to A (the "attached elsewhere" path of a stack); reschedule-to-local lists X in the fabric pool only once free, so B
waits until A's copy is gone. Count-based entries name no device: the suite cannot ask for the one A used, so the
scenario is skipped there (the run-wide IMP-10..12 still judge every move the stack makes on its own).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import claim_template, pinned_pod
from conformance.observe.attachments import stamp
from conformance.observe.recorder import Sample
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go
from conformance.suite.scenario import Context, result_fixture, scenario


@dataclass
class Move:
    device: str
    node_a: str
    node_b: str
    first: Outcome | None = None
    second: Outcome | None = None
    path: list[str] = field(default_factory=list)  # X's states in the probe from A's binding to B's, changes only
    problems: list[str] = field(default_factory=list)  # the fabric's order of the move
    let_go: LetGo | None = None


@scenario(
    "device-mobility",
    "a device used on one node is released and then asked for by a pod pinned to another node of its fabric",
    ("IMP-19",),
    probe=True,
)
def device_mobility(ctx: Context) -> Move:
    if ctx.counted:
        pytest.skip(
            "count-based fabric entries name no physical device: the suite cannot ask node B for the device node A "
            "used (IMP-10..12 judge every move the stack makes on its own)"
        )
    nodes = ctx.fabric_only_nodes(1)
    if not nodes:
        pytest.skip(f"no node without node-local {ctx.profile.driver} devices is reached by a fabric pool")
    node_a = nodes[0]
    lease = ctx.lease(1, "fabric", node_a)
    reach = lease.devices[0].nodes - {node_a}
    # B: preferably a node without node-local devices too (other scenarios' pods there ask for their own devices).
    others = [n for n in nodes if n in reach] or sorted(n.name for n in ctx.nodes() if n.name in reach)
    if not others:
        pytest.skip(f"the fabric device {lease.identities[0]} reaches no node but {node_a}: it cannot move")
    node_b = others[0]
    move = Move(lease.identities[0], node_a, node_b)
    klass = ctx.device_class(lease)
    probe = ctx.probe
    assert probe is not None  # probe=True

    ns_a = ctx.namespace(f"{ctx.scenario.name}-a")
    ctx.objects.create(claim_template("gpu", klass), ns_a)
    with ctx.history(ns_a) as history_a:
        ctx.objects.create(pinned_pod("app", "gpu", node_a), ns_a)
        move.first = first = follow(ctx, history_a, node_a)
        problems = first.binding_problems()
        if problems:
            raise AssertionError(f"the pod on {node_a} (before the move) did not bind as owed:\n" + "\n".join(problems))
        delete_pod(ctx, ns_a, history_a)
    ns_b = ctx.namespace(f"{ctx.scenario.name}-b")
    ctx.objects.create(claim_template("gpu", klass), ns_b)
    with ctx.history(ns_b) as history_b:
        ctx.objects.create(pinned_pod("app", "gpu", node_b), ns_b)
        # The device first has to leave A (its idle grace, a detach): that time comes on top of the bind.
        timeout = bind_timeout(ctx.profile, ctx.profile.promises.detach_s)
        move.second = second = follow(ctx, history_b, node_b, timeout=timeout)
        assert first.binding is not None and second.binding is not None
        ctx.measure("move_seconds", round(second.binding.at - first.binding.at, 3))
        move.path, move.problems = judge_move(probe.samples(first.binding.at), move.device, node_a, node_b)
        released = time.monotonic()
        delete_pod(ctx, ns_b, history_b)
    move.let_go = let_go(ctx, [move.device], lease, released, ctx.profile.promises.detach_s)
    return move


def judge_move(samples: list[Sample], device: str, node_a: str, node_b: str) -> tuple[list[str], list[str]]:
    """X's path through the probe's answers from A's binding on, and what is wrong with its order: it must leave A
    (an answer with it free, or detaching from A) before any answer lists it on B."""
    path: list[str] = []
    left_a = False
    problems: list[str] = []
    last = None
    for s in samples:
        state = s.states.get(device)
        said = f"{state[1]} {state[0]}" if state else "free"
        if said != last:
            path.append(f"{stamp(s.sent)} {said}")
            last = said
        if state is None or state == (node_a, "detaching"):
            left_a = True
        elif state[0] == node_b:
            if not left_a:
                problems.append(
                    f"the probe answer sent {stamp(s.sent)} lists {device} {state[1]} on {node_b} with no answer "
                    f"between showing it leave {node_a} (free, or detaching from {node_a})"
                )
            break
    return path, problems


move = result_fixture("move", "device-mobility")


@pytest.mark.requirement("IMP-19")
def test_the_device_leaves_the_first_node_before_it_is_attached_to_the_second(move: Move) -> None:
    assert move.second is not None
    path = "\n  ".join(move.path)
    assert any(move.node_b in p for p in move.path), f"the probe never listed {move.device} on {move.node_b}:\n  {path}"
    assert not move.problems, "\n".join(move.problems) + f"\n  {move.device} in the probe:\n  {path}"


@pytest.mark.requirement("IMP-19")
def test_no_condition_for_the_second_node_before_the_device_is_attached_there(move: Move) -> None:
    second = move.second
    assert second is not None
    path = "\n  ".join(move.path)
    assert second.judged, f"no condition of the allocation on {move.node_b} was seen True:\n  {second.describe()}"
    assert not second.early, "\n".join(second.early) + f"\n  {move.device} in the probe:\n  {path}"
    problems = second.binding_problems()
    assert not problems, "\n".join(problems) + f"\n  {second.describe()}\n  {move.device} in the probe:\n  {path}"


@pytest.mark.requirement("IMP-19")
def test_the_moved_device_is_let_go_after_the_second_pod(move: Move) -> None:
    got = move.let_go
    assert got is not None and not got.problem(), got.problem() if got else "no release observed"
