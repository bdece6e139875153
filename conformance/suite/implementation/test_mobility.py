"""IMP-19 device mobility: a device used on node A, released, then asked for by a pod pinned to node B of the same
fabric — what a composable fabric is for.

Identified entries: one leased physical device X that reaches two nodes. A pod pinned to A binds with it (judged as
attach-before-bind), then pod and claim are deleted and at once a pod pinned to B asks for X alone (a DeviceClass
over X's identity, so every copy of it and nothing else). Whatever the stack does meanwhile (keep X attached to A for
reuse, hide and detach it first, move it on demand), the fabric must show X leave A — free, or detaching from A —
before any answer lists it on B; no condition of B's allocation may be True before the fabric says X is attached to
B; and the pod on B binds with X attached to B. Then X is let go as usual.

Per binding model: keep-in-pool offers X while it idles on A, so B's claim is allocated X while X is still attached
to A (the "attached elsewhere" path of a stack); reschedule-to-local lists X in the fabric pool only once free, so B
waits until A's copy is gone. Count-based entries name no device: A and B are nodes of one fabric the scenario has
to itself, and B's pod is created once the probe shows A's device gone from A (steered by the probe: a stack that
hands out free devices in some order may well pick it again); the device B gets is the stack's choice, and its path
is judged the same way (listed on any other node, it must leave there before it is listed on B).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import claim_template, pinned_pod
from conformance.cluster.waits import wait_for
from conformance.observe.attachments import stamp
from conformance.observe.recorder import PROBE_PERIOD_S, Sample
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go
from conformance.suite.scenario import Context, result_fixture, scenario


@dataclass
class Move:
    used: str  # the device the pod on A ended with
    node_a: str
    node_b: str
    device: str = ""  # the device the pod on B ended with (identified: the one A used; count-based: the stack's)
    first: Outcome | None = None
    second: Outcome | None = None
    path: list[str] = field(default_factory=list)  # the device's states in the probe from A's binding on, changes only
    problems: list[str] = field(default_factory=list)  # the fabric's order of the move
    let_go: LetGo | None = None


@scenario(
    "device-mobility",
    "a device used on one node is released and then asked for by a pod pinned to another node of its fabric",
    ("IMP-19",),
    probe=True,
)
def device_mobility(ctx: Context) -> Move:
    nodes = ctx.fabric_only_nodes(1)
    if not nodes:
        pytest.skip(f"no node without node-local {ctx.profile.driver} devices is reached by a fabric pool")
    probe = ctx.probe
    assert probe is not None  # probe=True
    if ctx.counted:  # capacity on a node the scenario has to itself (what is attached there is its); B's comes later
        lease_a = ctx.lease(1, "fabric", nodes, exclusive=True, part="a")
        assert lease_a.counted is not None and lease_a.node is not None
        node_a = lease_a.node
        others = [n for n in nodes if n != node_a and n in lease_a.counted.nodes]
        if not others:
            pytest.skip(f"no second node without node-local devices on the fabric of {node_a}: nothing can move")
        node_b, classes = others[0], (ctx.device_class(lease_a), "")
    else:
        node_a = nodes[0]
        lease_a = lease_b = ctx.lease(1, "fabric", node_a)
        reach = lease_a.devices[0].nodes - {node_a}
        # B: preferably a node without node-local devices too (other scenarios' pods there ask for their own devices).
        others = [n for n in nodes if n in reach] or sorted(n.name for n in ctx.nodes() if n.name in reach)
        if not others:
            pytest.skip(f"the fabric device {lease_a.identities[0]} reaches no node but {node_a}: it cannot move")
        node_b = others[0]
        klass = ctx.device_class(lease_a)
        classes = (klass, klass)

    ns_a = ctx.namespace(f"{ctx.scenario.name}-a")
    ctx.objects.create(claim_template("gpu", classes[0]), ns_a)
    with ctx.history(ns_a) as history_a:
        ctx.objects.create(pinned_pod("app", "gpu", node_a), ns_a)
        first = follow(ctx, history_a, node_a)
        problems = first.binding_problems()
        if problems:
            raise AssertionError(f"the pod on {node_a} (before the move) did not bind as owed:\n" + "\n".join(problems))
        used = next((i for i in first.final_identities() if i), None)
        if used is None:
            raise AssertionError(f"the device of the pod on {node_a} has no physical identity:\n  {first.describe()}")
        move = Move(used, node_a, node_b, first=first)
        delete_pod(ctx, ns_a, history_a)
    if ctx.counted:
        wait_for(
            lambda: probe.now().get(used),
            lambda state: state is None or state[0] != node_a,
            timeout=ctx.profile.promises.detach_s + PROBE_PERIOD_S,
            expected=f"{used} gone from {node_a} after its pod and claim (detachSeconds)",
        )
        # A goes back before B is leased: holding two nodes of one fabric at once would wait for both to be free.
        ctx.pool.release(lease_a)
        ctx.leases.remove(lease_a)
        lease_b = ctx.lease(1, "fabric", others, exclusive=True, part="b")
        move.node_b = node_b = lease_b.node or others[0]
        classes = (classes[0], ctx.device_class(lease_b))
    ns_b = ctx.namespace(f"{ctx.scenario.name}-b")
    ctx.objects.create(claim_template("gpu", classes[1]), ns_b)
    with ctx.history(ns_b) as history_b:
        ctx.objects.create(pinned_pod("app", "gpu", node_b), ns_b)
        # The device first has to leave A (its idle grace, a detach): that time comes on top of the bind.
        timeout = bind_timeout(ctx.profile, ctx.profile.promises.detach_s)
        move.second = second = follow(ctx, history_b, node_b, timeout=timeout)
        assert first.binding is not None and second.binding is not None
        ctx.measure("move_seconds", round(second.binding.at - first.binding.at, 3))
        move.device = next((i for i in second.final_identities() if i), used)
        move.path, move.problems = judge_move(probe.samples(first.binding.at), move.device, node_b)
        ctx.say(f"{ctx.scenario.name}: {_moved(move).splitlines()[0]}")
        released = time.monotonic()
        delete_pod(ctx, ns_b, history_b)
    move.let_go = let_go(ctx, [move.device], lease_b, released, ctx.profile.promises.detach_s)
    return move


def judge_move(samples: list[Sample], device: str, node_b: str) -> tuple[list[str], list[str]]:
    """The device's path through the probe's answers, and what is wrong with its order: listed on another node, it
    must leave it (an answer with it free, or detaching from there) before any answer lists it on B."""
    path: list[str] = []
    problems: list[str] = []
    left, last, where = True, "", ""
    for s in samples:
        state = s.states.get(device)
        said = f"{state[1]} {state[0]}" if state else "free"
        if said != last:
            path.append(f"{stamp(s.sent)} {said}")
            last = said
        if state is None:
            left = True
        elif state[0] != node_b:
            left, where = state[1] == "detaching", state[0]
        else:
            if not left:
                problems.append(
                    f"the probe answer sent {stamp(s.sent)} lists {device} {state[1]} on {node_b} with no answer "
                    f"between showing it leave {where} (free, or detaching from {where})"
                )
            break
    return path, problems


move = result_fixture("move", "device-mobility")


def _moved(move: Move) -> str:
    same = "the device A used" if move.device == move.used else f"not the device A used ({move.used})"
    return f"{move.device} ({same}) in the probe from the binding on {move.node_a}:\n  " + "\n  ".join(move.path)


@pytest.mark.requirement("IMP-19")
def test_the_device_leaves_the_first_node_before_it_is_attached_to_the_second(move: Move) -> None:
    assert move.second is not None
    assert any(move.node_b in p for p in move.path), f"the probe never listed it on {move.node_b}: {_moved(move)}"
    assert not move.problems, "\n".join(move.problems) + f"\n  {_moved(move)}"


@pytest.mark.requirement("IMP-19")
def test_no_condition_for_the_second_node_before_the_device_is_attached_there(move: Move) -> None:
    second = move.second
    assert second is not None
    assert second.judged, f"no condition of the allocation on {move.node_b} was seen True:\n  {second.describe()}"
    assert not second.early, "\n".join(second.early) + f"\n  {_moved(move)}"
    problems = second.binding_problems()
    assert not problems, "\n".join(problems) + f"\n  {second.describe()}\n  {_moved(move)}"


@pytest.mark.requirement("IMP-19")
def test_the_moved_device_is_let_go_after_the_second_pod(move: Move) -> None:
    got = move.let_go
    assert got is not None and not got.problem(), got.problem() if got else "no release observed"
