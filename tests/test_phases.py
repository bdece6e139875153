"""Unit tests of the two implementation phases (conformance/suite/phases.py): which claims are foreign, the switch that
opens the foreign-free phase, the runner holding every implementation scenario but coexistence until it opens, the
phase each test is judged in, and the promise counted anew from the phase's opening.

No cluster: the steps and the live claims are stand-ins, said so here."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from test_scenario_runner import _runner, _scenario  # the runner's own stand-ins

from conformance.cluster.waits import CANCELLED, Cancelled
from conformance.observe.publishing import PublishLog
from conformance.suite.phases import (
    CLUSTER,
    COEXISTENCE,
    FIXTURES,
    FOREIGN_FREE,
    WHOLE_RUN,
    ForeignFree,
    Switch,
    foreign_claims,
    judged_in,
    phase_of_test,
)
from conformance.suite.record import Scenario

OWN = "gpu.fabric.example.com"


def _claim(name: str, driver: str, conditions: bool = True) -> dict[str, Any]:
    result = {"driver": driver, "pool": "p", "device": "d", "request": "r"}
    if conditions:
        result |= {"bindingConditions": ["x/ready"], "bindingFailureConditions": ["x/failed"]}
    return {"metadata": {"namespace": "ns", "name": name}, "status": {"allocation": {"devices": {"results": [result]}}}}


def test_foreign_claims_are_other_drivers_allocations_with_binding_conditions() -> None:
    claims = [
        _claim("own", OWN),
        _claim("sch", "sch-1.conformance.example.com"),
        _claim("plain", "imp9-1.conformance.example.com", conditions=False),
        {"metadata": {"namespace": "ns", "name": "pending"}},
    ]
    assert foreign_claims(claims, OWN) == ["ns/sch (sch-1.conformance.example.com)"]


def test_the_switch_opens_after_every_step_and_once_no_foreign_claim_is_live() -> None:
    order: list[str] = []
    live = [["ns/a (x)"], ["ns/a (x)"], []]
    said: list[str] = []
    switch = Switch(
        [("one", lambda: order.append("one") or "one ended"), ("two", lambda: order.append("two") or "")],
        lambda: live.pop(0) if len(live) > 1 else live[0],
        said.append,
        timeout_s=10,
    )
    gate = ForeignFree()
    switch.run(gate)
    assert order == ["one", "two"] and gate.is_open and not gate.left
    assert gate.note == "one: one ended", "a step that says nothing is not listed"
    assert said and "no other driver's binding-condition claim live" in said[0]


def test_the_switch_opens_anyway_naming_what_is_still_live_or_what_failed() -> None:
    gate = ForeignFree()
    Switch([], lambda: ["ns/stuck (sch-1)"], lambda _m: None, timeout_s=0.6).run(gate)
    assert gate.is_open and gate.left == ["ns/stuck (sch-1)"] and "still live after 0.6s" in gate.note
    assert gate.report()["foreignClaimsStillLive"] == ["ns/stuck (sch-1)"]

    def broken() -> str:
        raise RuntimeError("the cluster runner vanished")

    failed = ForeignFree()
    Switch([("cluster scenarios", broken)], lambda: [], lambda _m: None).run(failed)
    assert failed.is_open and "the cluster runner vanished" in failed.note, "no scenario may wait for ever"


def test_the_runner_holds_every_implementation_scenario_but_coexistence_until_the_phase_opens() -> None:
    started: dict[str, float] = {}

    def note(name: str) -> Any:
        return lambda ctx: started.setdefault(name, time.time())

    gate = ForeignFree()
    runner, _ = _runner(
        [
            _scenario("coexistence", note("coexistence"), beside_others=True),
            _scenario("restart", note("restart"), exclusive=True),
            _scenario("attach", note("attach")),
        ]
    )
    runner.foreign_free = gate
    runner.start()
    runner.result("coexistence")
    assert runner.wait_beside_others() == ["coexistence"]
    time.sleep(0.3)  # the held scenarios had time to start, were they not held
    assert set(started) == {"coexistence"}
    opened = time.time()
    threading.Timer(0.1, gate.open).start()
    runner.result("attach")
    runner.join()
    assert started["restart"] >= opened and started["attach"] >= started["restart"], "exclusive first, after the gate"


def _scenarios() -> dict[str, Scenario]:
    def sc(name: str, **kw: Any) -> Scenario:
        return Scenario(name, "d", ("IMP-2",), lambda ctx: None, "m", **kw)

    return {
        "coexistence": sc("coexistence", beside_others=True),
        "attach": sc("attach"),
        "gate": sc("gate", implementation=False),
    }


def test_each_test_is_judged_in_the_phase_of_the_scenarios_it_reads() -> None:
    registry = _scenarios()
    FIXTURES.update({("m", "coexist"): ("coexistence",), ("m", "flow"): ("attach",), ("c", "gate"): ("gate",)})
    try:
        assert phase_of_test("m", ["coexist", "recorder"], registry, False, False) == COEXISTENCE
        assert phase_of_test("m", ["flow"], registry, False, False) == FOREIGN_FREE
        assert phase_of_test("m", ["truth", "scenarios"], registry, False, False) == WHOLE_RUN, "reads the record"
        assert phase_of_test("m", ["foreign_free_phase", "cluster"], registry, False, False) == FOREIGN_FREE, "IMP-1"
        assert phase_of_test("c", ["gate"], registry, False, True) == CLUSTER
        assert phase_of_test("c", ["namespace"], registry, False, True) == CLUSTER, "an API test"
        assert phase_of_test("c", ["recorder"], registry, True, True) == WHOLE_RUN, "SCH-9 over every claim"
    finally:
        for key in (("m", "coexist"), ("m", "flow"), ("c", "gate")):
            FIXTURES.pop(key)
    assert judged_in(FOREIGN_FREE) == "judged in the foreign-free phase: no other driver's binding-condition claim live"


def test_the_promise_counts_anew_from_the_foreign_free_phase() -> None:
    log = PublishLog(ready_at=1000.0, promise_s=60.0)
    assert log.deadline == 1060.0 and log.counted_from() == "of its readiness"
    log.rebase(1200.0)
    assert log.deadline == 1260.0
    assert log.counted_from() == "of the foreign-free phase's opening (+200.0s after its readiness)"
    assert log.steps[-1] == (1200.0, "the foreign-free phase opened: the promise counts anew from here")


def test_a_gate_wait_stops_on_the_runs_cancellation() -> None:
    CANCELLED.set()
    try:
        with pytest.raises(Cancelled, match="foreign-free phase"):
            ForeignFree().wait()
    finally:
        CANCELLED.clear()


def test_a_run_wide_rule_with_nothing_to_judge_names_the_scenarios_that_failed_before_they_could_show_it() -> None:
    from conformance.suite.judged import nothing_judged

    said: list[tuple[str, Any]] = []

    def record(name: str, value: Any) -> None:
        said.append((name, value))

    failed = {"attach-before-bind": "the implementation did not publish a node ... reached by 1 fabric device(s)"}
    with pytest.raises(pytest.skip.Exception) as caught:
        nothing_judged("IMP-11: nothing could be judged: ['no binding condition ... was True']", failed, record)
    assert str(caught.value.msg).startswith("not judged: IMP-11: nothing could be judged")
    assert "1 implementation scenarios failed before they could show it (attach-before-bind: the implem" in str(
        caught.value.msg
    )
    assert said == [("outcome", "not-judged")], "pytest's terminal counts it not judged"
    with pytest.raises(pytest.skip.Exception, match=r"^IMP-12: nothing"):  # nothing failed: a plain skip
        nothing_judged("IMP-12: nothing could be judged: []", {}, record)
