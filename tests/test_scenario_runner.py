"""Unit tests of the scenario runner: results, skips for missing capabilities, invariant violations, timings.

The Context is built with stand-ins (a fake, said so here): no cluster; what is tested is how the runner turns a
scenario's outcome into what its tests see.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster.providers.base import ClusterInfo, Crash
from conformance.implementation.profile import API_VERSION, KIND, Profile
from conformance.observe.devices import DevicePool
from conformance.observe.invariants import Violation
from conformance.observe.recorder import Record, Recorder
from conformance.report.figures import figures
from conformance.suite.scenario import Context, InvariantViolated, Scenario, ScenarioRunner, summarize


@dataclass
class _Objects:
    run_id: str = "r"
    cleaned: int = 0

    def cleanup(self) -> list[str]:
        self.cleaned += 1
        return []


class _Cluster:
    user_agent = ""
    info = ClusterInfo("c", "local", Path("/dev/null"), "v1.37.2", {}, 20, True, [])

    def close(self) -> None:
        pass


@dataclass
class _Watcher:
    violations: list[Violation] = field(default_factory=list)

    def since(self, start: float, namespaces: set[str], identities: set[str]) -> list[Violation]:
        return [v for v in self.violations if v.namespaces & namespaces]


PROFILE = Profile.model_validate(
    {"apiVersion": API_VERSION, "kind": KIND, "name": "p", "version": "1", "driver": "d.example.com"}
    | {"capabilities": {"a": True}}
)


def _runner(
    scenarios: list[Scenario],
    watcher: _Watcher | None = None,
    concurrency: int | None = None,
    record: Recorder | None = None,
) -> tuple[ScenarioRunner, list[_Objects]]:
    made: list[_Objects] = []

    def context(sc: Scenario) -> Context:
        made.append(_Objects())
        pool = DevicePool("d.example.com", "uuid", {})
        return Context(
            scenario=sc,
            cluster=_Cluster(),  # type: ignore[arg-type]
            implementation=None,  # type: ignore[arg-type]
            profile=PROFILE,
            pool=pool,
            objects=made[-1],  # type: ignore[arg-type]
            say=lambda _m: None,
            record=record or Recorder(None, "r"),
        )

    runner = ScenarioRunner(scenarios, context, watcher, lambda _m: None, concurrency)  # type: ignore[arg-type]
    return runner, made


def _scenario(name: str, run: Any, **kw: Any) -> Scenario:
    return Scenario(name, "d", ("API-1",), run, "m", **kw)


def test_results_skips_and_cleanup() -> None:
    def measured(ctx: Context) -> str:
        ctx.measure("x_seconds", 2.0)
        return "seen"

    runner, made = _runner([_scenario("ok", measured), _scenario("needs-b", lambda ctx: "never", capabilities=("b",))])
    runner.start()
    assert runner.result("ok") == "seen"
    with pytest.raises(pytest.skip.Exception, match=r"capabilities \['b'\]"):
        runner.result("needs-b")
    runner.join()
    assert [o.cleaned for o in made] == [1, 1], "every scenario cleans up, skipped or not"
    assert runner.timings["ok"].outcome == "passed" and runner.timings["needs-b"].outcome == "skipped"
    assert runner.measurements == {"x_seconds": [2.0]}


def test_a_violation_in_the_scenarios_namespace_fails_it() -> None:
    def uses_namespace(ctx: Context) -> str:
        ctx.namespaces.add("ns-1")
        return "seen"

    watcher = _Watcher([Violation(0.0, "held-twice", "U0", ("ns-1/a", "ns-1/b"), frozenset({"ns-1"}))])
    runner, _ = _runner([_scenario("s", uses_namespace)], watcher)
    runner.start()
    with pytest.raises(InvariantViolated, match="held-twice U0: ns-1/a, ns-1/b"):
        runner.result("s")
    runner.join()


def test_the_schedulers_double_allocation_leaves_the_scenario_unjudged_not_failed() -> None:
    def fails_after(ctx: Context) -> str:
        ctx.namespaces.add("ns-1")
        raise AssertionError("pod ns-1/p not bound within 60s")

    watcher = _Watcher([Violation(0.0, "allocated-twice", "U0", ("ns-1/a", "ns-2/b"), frozenset({"ns-1", "ns-2"}))])
    runner, _ = _runner([_scenario("s", fails_after)], watcher)
    runner.start()
    with pytest.raises(pytest.skip.Exception, match=r"(?s)not judged: kube-scheduler.*SCH-9.*and then: pod ns-1/p"):
        runner.result("s")
    runner.join()
    assert runner.timings["s"].outcome == "skipped"


def test_an_unjudged_scenario_names_the_known_defect_the_double_allocation_was() -> None:
    record = Recorder(None, "r")

    def claim(name: str, rev: int, at: float, device: str | None) -> Record:
        result = {"driver": "d", "pool": "p", "device": device, "request": "r", "bindingConditions": ["d/ready"]}
        status = {"allocation": {"devices": {"results": [result]}}} if device else {}
        obj = {"metadata": {"name": name, "namespace": "ns-1", "uid": name}, "status": status}
        return Record(len(record.records), at, "claim", "MODIFIED", "ns-1", name, rev, obj)

    # a's pod timed out (20 s, nothing written); b was allocated a's device before a was cleared
    record.records += [claim("a", 10, 100.0, "d0"), claim("b", 25, 120.1, "d0"), claim("a", 30, 122.0, None)]

    def sees_it(ctx: Context) -> str:
        ctx.namespaces.add("ns-1")
        return "seen"

    watcher = _Watcher([Violation(0.0, "allocated-twice", "U0", ("ns-1/a", "ns-1/b"), frozenset({"ns-1"}))])
    runner, _ = _runner([_scenario("s", sees_it)], watcher, record=record)
    runner.start()
    with pytest.raises(
        pytest.skip.Exception,
        match=r"not judged.*known upstream defect: double-allocation-after-binding-timeout, write-up docs/upstream/",
    ):
        runner.result("s")
    runner.join()


def test_summarize_and_figures() -> None:
    assert summarize([3.0, 1.0, 2.0]) == {"count": 3, "median": 2.0, "p95": 3.0, "min": 1.0, "max": 3.0}
    report = {
        "cluster": {"kubernetes": "1.37.2", "provider": "local", "bringUpSeconds": 6.0},
        "wallSeconds": 80.0,
        "scenarios": {"a": {"seconds": 10.0, "outcome": "passed"}},
        "measurements": {
            "attach_to_bind_seconds": summarize([5.0, 6.0]),
            "scale_pods_per_second_with_conditions": summarize([2.0]),
            "scale_pods_per_second_without_conditions": summarize([4.0]),
            "allocations_per_claim": summarize([2.0]),
            "attaches_per_bound_pod": summarize([1.0, 2.0]),
        },
    }
    text = "\n".join(figures(report))
    assert "suite wall time" in text and "80.0 s" in text
    assert "allocations per claim       median 2, max 2 (n=1)" in text
    assert "attaches per bound pod      median 1.5, max 2 (n=2)" in text
    assert "with conditions 2.00, without 4.00, ratio 0.50" in text


def test_fabric_concurrency_bounds_implementation_scenarios_only() -> None:
    """With fabricConcurrency 1 implementation scenarios run one after another; cluster scenarios are not held."""
    lock = threading.Lock()
    running: list[str] = []
    peak: list[int] = []

    def busy(ctx: Context) -> None:
        with lock:
            running.append(ctx.scenario.name)
            peak.append(sum(1 for n in running if n.startswith("imp")))
        time.sleep(0.2)  # stands for a scenario's work; the test checks overlap, not time
        with lock:
            running.remove(ctx.scenario.name)

    names = ["imp-a", "imp-b", "imp-c"]
    scenarios = [_scenario(n, busy) for n in names] + [_scenario("cluster-x", busy, implementation=False)]
    runner, _ = _runner(scenarios, concurrency=1)
    runner.start()
    for n in [*names, "cluster-x"]:
        runner.result(n)
    runner.join()
    assert max(peak) == 1
    wall = runner.wall()
    assert wall is not None and wall >= 0.6


def test_an_exclusive_scenario_runs_alone_and_first() -> None:
    """A scenario that disturbs the shared implementation (exclusive) never overlaps another implementation
    scenario; cluster scenarios are not held."""
    lock = threading.Lock()
    running: set[str] = set()
    overlaps: list[set[str]] = []
    order: list[str] = []

    def busy(ctx: Context) -> None:
        with lock:
            running.add(ctx.scenario.name)
            order.append(ctx.scenario.name)
            overlaps.append(set(running))
        time.sleep(0.2)  # stands for a scenario's work; the test checks overlap, not time
        with lock:
            running.discard(ctx.scenario.name)

    scenarios = [
        _scenario("imp-a", busy),
        _scenario("restart", busy, exclusive=True),
        _scenario("imp-b", busy),
        _scenario("cluster-x", busy, implementation=False),
    ]
    runner, _ = _runner(scenarios)
    runner.start()
    for sc in scenarios:
        runner.result(sc.name)
    runner.join()
    for seen in overlaps:
        if "restart" in seen:
            assert seen - {"cluster-x"} == {"restart"}, overlaps
    assert next(n for n in order if n != "cluster-x") == "restart", order


def test_a_failed_scenario_hands_over_the_steps_it_reached_and_what_it_observed_by_then() -> None:
    """Read before the cleanup (the record still holds it); what cannot be read is said, never a second failure."""
    from conformance.suite.record import Step

    steps = (Step("first", evidence=("API-1",)), Step("second"))

    def midway(ctx: Context) -> str:
        ctx.step("first", lambda: f"seen before cleanup {ctx.objects.cleaned}")  # type: ignore[attr-defined]
        raise AssertionError("timed out waiting for the second")

    def unreadable(ctx: Context) -> str:
        ctx.step("first", lambda: 1 / 0)
        raise AssertionError("timed out")

    def undeclared(ctx: Context) -> str:
        ctx.step("third", lambda: None)
        return "never"

    scenarios = [_scenario(n, f, steps=steps) for n, f in (("midway", midway), ("bad", unreadable))]
    runner, _ = _runner([*scenarios, _scenario("undeclared", undeclared, steps=steps)])
    runner.start()
    runner.join()
    assert runner.progress["midway"].reached == ("first",)
    assert runner.progress["midway"].partial == "seen before cleanup 0"
    assert runner.progress["bad"].unread.startswith("what it had observed could not be read: ZeroDivisionError")
    with pytest.raises(ValueError, match="declares no step 'third'"):
        runner.result("undeclared")


def _crash(at: float, restarted: bool = True) -> Crash:
    return Crash("kube-scheduler", at, "panic: index out of range [29] with length 29", "syncSlice", "log", restarted)


def test_a_scenario_that_failed_under_a_control_plane_crash_runs_again_and_only_that_attempt_is_judged() -> None:
    crashes: list[Crash] = []
    attempts: list[float] = []

    def crashed_once(ctx: Context) -> str:
        attempts.append(time.time())
        ctx.measure("detach_seconds", float(len(attempts)))
        if len(attempts) == 1:
            crashes.append(_crash(time.time()))  # the scheduler panicked while it ran, and the wait failed after
            raise AssertionError("claim ns-1/c not reallocated within 25s")
        return "seen"

    runner, made = _runner([_scenario("s", crashed_once)])
    runner._crashes = lambda: crashes
    runner.start()
    assert runner.result("s") == "seen"
    runner.join()
    timing = runner.timings["s"]
    assert len(attempts) == 2 and [o.cleaned for o in made] == [1, 1], "each attempt in its own objects, cleaned"
    assert timing.outcome == "passed" and timing.attempt == 2 and timing.start >= attempts[1] - 0.01
    assert timing.again == (
        "kube-scheduler crashed at "
        + time.strftime("%H:%M:%S", time.gmtime(crashes[0].at))
        + " UTC while it ran (SCH-11: panic: index out of range [29] with length 29); "
        "that attempt failed: claim ns-1/c not reallocated within 25s",
    )
    assert "s" not in runner.progress, "a failed attempt's progress is not the judged attempt's"
    assert runner.measurements == {"detach_seconds": [2.0]}, "only the judged attempt's figures"


@pytest.mark.parametrize(
    ("in_window", "restarted", "runs"),
    [(True, True, 2), (False, True, 1), (True, False, 1)],
    ids=["a second crash leaves the failure", "a crash before it reruns nothing", "left down: nothing to rerun on"],
)
def test_when_a_failure_under_a_crash_is_run_again(in_window: bool, restarted: bool, runs: int) -> None:
    crashes: list[Crash] = []
    attempts: list[int] = []

    def always_fails(ctx: Context) -> str:
        attempts.append(1)
        crashes.append(_crash(time.time() if in_window else 0.0, restarted))
        raise AssertionError("pod ns-1/p not bound within 60s")

    runner, _ = _runner([_scenario("s", always_fails)])
    runner._crashes = lambda: crashes
    runner.start()
    with pytest.raises(AssertionError, match="not bound"):
        runner.result("s")
    runner.join()
    assert len(attempts) == runs


def test_a_scenario_that_passed_under_a_crash_is_kept_and_a_skip_is_not_run_again() -> None:
    crashes: list[Crash] = []
    attempts: list[str] = []

    def passes(ctx: Context) -> str:
        attempts.append("passes")
        crashes.append(_crash(time.time()))
        return "seen"

    def gap(ctx: Context) -> str:
        attempts.append("gap")
        crashes.append(_crash(time.time()))
        pytest.skip("the profile declares no detach")

    runner, _ = _runner([_scenario("a", passes), _scenario("b", gap)])
    runner._crashes = lambda: crashes
    runner.start()
    assert runner.result("a") == "seen"
    with pytest.raises(pytest.skip.Exception, match="no detach"):
        runner.result("b")
    runner.join()
    assert sorted(attempts) == ["gap", "passes"]


def test_the_schedulers_double_allocation_runs_the_scenario_again_once() -> None:
    attempts: list[int] = []

    def fails_after(ctx: Context) -> str:
        attempts.append(1)
        ctx.namespaces.add("ns-1")
        raise AssertionError("pod ns-1/p not bound within 60s")

    watcher = _Watcher([Violation(0.0, "allocated-twice", "U0", ("ns-1/a", "ns-2/b"), frozenset({"ns-1", "ns-2"}))])
    runner, _ = _runner([_scenario("s", fails_after)], watcher)
    runner.start()
    with pytest.raises(pytest.skip.Exception, match="SCH-9"):
        runner.result("s")
    runner.join()
    assert len(attempts) == 2 and runner.timings["s"].again[0].startswith("scenario s: not judged: kube-scheduler")


def test_a_broken_invariant_under_a_crash_stands_and_is_not_run_again() -> None:
    crashes: list[Crash] = []
    attempts: list[int] = []

    def holds_twice(ctx: Context) -> str:
        attempts.append(1)
        ctx.namespaces.add("ns-1")
        crashes.append(_crash(time.time()))
        return "seen"

    watcher = _Watcher([Violation(0.0, "held-twice", "U0", ("ns-1/a", "ns-1/b"), frozenset({"ns-1"}))])
    runner, _ = _runner([_scenario("s", holds_twice)], watcher)
    runner._crashes = lambda: crashes
    runner.start()
    with pytest.raises(InvariantViolated, match="held-twice"):
        runner.result("s")
    runner.join()
    assert len(attempts) == 1, "the implementation's wrong act is its own, whatever the scheduler did"
