"""The lifecycle scenarios' shared waits (conformance/suite/implementation/settle.py): `let_go` (IMP-5, IMP-8,
IMP-13..16 judge a release by it) and `attaching` (the attach a fault caught in flight).

The scenario context, the fabric probe, the invariant watcher and the fault injector are stand-ins (fakes, said so
here) that answer from a script of moments; the waits themselves run for real, with their real deadlines.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from conformance.cluster.waits import WaitTimeout
from conformance.observe.devices import CountedPool, Lease
from conformance.observe.invariants import PERSIST_S
from conformance.suite.implementation.settle import attaching, let_go

NODE = "node-2"


class Script:
    """Answers by the seconds elapsed since it was made: `at` lists (from_s, value), the last one begun wins."""

    def __init__(self, *at: tuple[float, object]) -> None:
        self.began = time.monotonic()
        self.at = at

    def now(self) -> object:
        elapsed = time.monotonic() - self.began
        return [v for s, v in self.at if s <= elapsed][-1]


def _ctx(probe: Script, free: Script, complete: bool = True) -> SimpleNamespace:
    """`free`: the free entries offering a device, per node asked (None: any node)."""
    watcher = SimpleNamespace(
        free_entries=lambda device, node=None: free.now()[node] if isinstance(free.now(), dict) else free.now(),
        counted_complete=lambda pool, model: (complete, f"pool complete: {complete}"),
    )
    measured: dict[str, float] = {}
    return SimpleNamespace(
        probe=SimpleNamespace(now=probe.now),
        invariants=watcher,
        measure=lambda name, value: measured.__setitem__(name, value),
        measured=measured,
    )


def _identified() -> Lease:
    return Lease("scenario", [])


def _counted() -> Lease:
    return Lease("scenario", [], counted=CountedPool("pool", "gpu", 4, frozenset({NODE})), count=1, node=NODE)


def test_a_device_detached_and_offered_once_is_let_go_with_both_times() -> None:
    probe = Script((0, {"d1": (NODE, "attached")}), (0.5, {}))
    free = Script((0, []), (0.8, ["entry-d1"]))
    ctx = _ctx(probe, free)
    seen = let_go(ctx, ["d1"], _identified(), time.monotonic(), deadline_s=5, interval=0.05)  # type: ignore[arg-type]
    assert seen.problem() == ""
    assert seen.detached_s is not None and 0.45 <= seen.detached_s <= 0.7, seen
    assert seen.after_s is not None and 0.75 <= seen.after_s <= 1.0, seen
    assert ctx.measured["let_go_seconds"] == seen.after_s


def test_two_free_entries_for_one_device_are_not_a_let_go() -> None:
    ctx = _ctx(Script((0, {})), Script((0, ["entry-a", "entry-b"])))
    seen = let_go(ctx, ["d1"], _identified(), time.monotonic(), deadline_s=0.5, interval=0.05)  # type: ignore[arg-type]
    assert seen.after_s is None and seen.detached_s is not None
    assert "entry-a" in seen.problem() and "entry-b" in seen.problem(), seen.problem()


def test_a_device_still_attached_is_not_let_go_and_says_what_was_seen() -> None:
    # Offered free while the fabric still has it attached: not a let-go either.
    ctx = _ctx(Script((0, {"d1": (NODE, "attached")})), Script((0, ["entry-d1"])))
    seen = let_go(ctx, ["d1"], _identified(), time.monotonic(), deadline_s=0.5, interval=0.05)  # type: ignore[arg-type]
    assert seen.after_s is None and seen.detached_s is None
    assert "attached" in seen.problem() and NODE in seen.problem(), seen.problem()


def test_an_offer_shorter_than_the_persistence_rule_does_not_count() -> None:
    blink = PERSIST_S / 3
    ctx = _ctx(Script((0, {})), Script((0, []), (0.1, ["entry-d1"]), (0.1 + blink, [])))
    seen = let_go(ctx, ["d1"], _identified(), time.monotonic(), deadline_s=0.5, interval=0.05)  # type: ignore[arg-type]
    assert seen.after_s is None, seen


def test_count_based_judges_the_scenarios_node_another_may_take_the_device_at_once() -> None:
    # The soak's case: the device leaves node-2 and is attached to node-6 for another scenario right after.
    probe = Script((0, {"d1": (NODE, "attached")}), (0.3, {}), (0.35, {"d1": ("node-6", "attached")}))
    free = Script((0, {NODE: []}))
    seen = let_go(_ctx(probe, free), ["d1"], _counted(), time.monotonic(), deadline_s=5, interval=0.05)  # type: ignore[arg-type]
    assert seen.problem() == "", seen
    assert seen.detached_s is not None and seen.detached_s <= 0.5, seen


def test_count_based_an_idle_copy_left_on_the_node_is_not_a_let_go() -> None:
    free = Script((0, {NODE: ["node-local copy of d1 on node-2"]}))
    seen = let_go(_ctx(Script((0, {})), free), ["d1"], _counted(), time.monotonic(), deadline_s=0.5, interval=0.05)  # type: ignore[arg-type]
    assert seen.after_s is None and "node-local copy" in seen.problem(), seen.problem()


def test_count_based_a_pool_short_of_the_fabric_is_not_a_let_go() -> None:
    ctx = _ctx(Script((0, {})), Script((0, {NODE: []})), complete=False)
    seen = let_go(ctx, ["d1"], _counted(), time.monotonic(), deadline_s=0.5, interval=0.05)  # type: ignore[arg-type]
    assert seen.after_s is None and "pool complete: False" in seen.problem(), seen.problem()


def test_the_time_the_scenario_held_the_detach_is_added_to_the_deadline() -> None:
    probe = Script((0, {"d1": (NODE, "attached")}), (0.6, {}))
    ctx = _ctx(probe, Script((0, ["entry-d1"])))
    seen = let_go(ctx, ["d1"], _identified(), time.monotonic(), deadline_s=0.2, down_s=0.6, interval=0.05)  # type: ignore[arg-type]
    assert seen.problem() == "", seen
    assert ctx.measured["let_go_seconds"] == round(seen.after_s - 0.6, 3), "the held time is not the stack's"
    late = let_go(
        _ctx(Script((0, {"d1": (NODE, "attached")}), (0.6, {})), Script((0, ["entry-d1"]))),  # type: ignore[arg-type]
        ["d1"],
        _identified(),
        time.monotonic(),
        deadline_s=0.2,
        interval=0.05,
    )
    assert late.problem() != "", "without the held time the same let-go is late"


def _faults(hits: Script) -> SimpleNamespace:
    return SimpleNamespace(hits=lambda fault: hits.now())


def test_attaching_waits_for_the_fault_hit_and_the_probe_both() -> None:
    hits = Script((0, []), (0.1, [{"device": "d1"}]))
    probe = Script((0, {}), (0.3, {"d1": (NODE, "attaching")}))
    began = time.monotonic()
    device = attaching(_ctx(probe, Script((0, []))), _faults(hits), "hang", NODE, timeout=3)  # type: ignore[arg-type]
    assert device == "d1" and time.monotonic() - began >= 0.3


def test_attaching_that_never_shows_says_what_was_held() -> None:
    ctx = _ctx(Script((0, {})), Script((0, [])))
    with pytest.raises(WaitTimeout) as caught:
        attaching(ctx, _faults(Script((0, [{"device": "d1"}]))), "hang", NODE, timeout=0.3, held=2)  # type: ignore[arg-type]
    assert "hang" in str(caught.value) and "2 other fabric operation(s)" in str(caught.value)


# --- unbacked_conditions: a condition True while the fabric still said not attached (IMP-13..15) ------------------
# The probe and the history are stand-ins (fakes, said so): samples with their sending times, claim events with the
# watch's delivery times. Irregular answers (a slow probe on kind) must neither excuse nor invent an early condition.


def _sample(sent: float, state: str | None) -> SimpleNamespace:
    return SimpleNamespace(sent=sent, states={"dev-a": (NODE, state)} if state else {})


def _claim_event(at: float, status: str) -> SimpleNamespace:
    result = {"driver": "d", "pool": "p", "device": "fabric-a", "bindingConditions": ["d/attached"]}
    claim = {
        "metadata": {"name": "app-dev"},
        "status": {
            "allocation": {"devices": {"results": [result]}},
            "devices": [{**result, "conditions": [{"type": "d/attached", "status": status}]}],
        },
    }
    return SimpleNamespace(obj=claim, at=at, revision=7)


def _judge(samples: list[SimpleNamespace], at: float) -> list[str]:
    from conformance.suite.implementation.settle import unattached_until, unbacked_conditions

    probe = SimpleNamespace(samples=lambda since: [s for s in samples if s.sent >= since])
    ctx = SimpleNamespace(profile=SimpleNamespace(identity_attribute="uuid"), identity=lambda pool, device: "dev-a")
    history = SimpleNamespace(events=lambda kind: [_claim_event(at, "True")])
    return unbacked_conditions(ctx, history, {"dev-a": unattached_until(probe, "dev-a", NODE, 0.0)})


def test_a_condition_seen_before_an_answer_that_still_says_attaching_is_unbacked() -> None:
    samples = [_sample(10.0, "attaching"), _sample(10.3, "attaching"), _sample(10.4, "attached")]
    found = _judge(samples, at=10.05)
    assert len(found) == 1 and "answer sent at 10.300 still did not show it attached" in found[0], found
    assert _judge(samples, at=10.25) == [], "within one probe period of that answer: a probe may lag the fabric"


def test_a_slow_probe_does_not_make_a_timely_condition_early() -> None:
    """A gap between answers: the attach ended somewhere in it; a condition seen inside it cannot be judged early
    (the rule it replaces, one probe period before the first attached answer, failed the reference on kind)."""
    samples = [_sample(10.0, "attaching"), _sample(10.6, "attached")]
    assert _judge(samples, at=10.4) == []
    assert _judge(samples, at=9.8) != []  # before an answer that said attaching: early, whatever the gap


def test_a_device_never_attached_is_unbacked_up_to_the_last_answer() -> None:
    samples = [_sample(10.0, None), _sample(10.5, "attaching")]
    assert _judge(samples, at=10.05) != [] and _judge(samples, at=10.45) == []
