"""The runner: starts the selected scenarios side by side and hands each module's tests its scenario's observation.

Scenarios run in threads, each in its own namespaces and with its own leased devices, so the suite takes about as
long as its longest scenario; a skip of a scenario becomes the outcome of each of its tests, a failure is handed to
them with how far the scenario got (suite/judged.py decides what each test makes of it).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.client import USER_AGENT
from conformance.cluster.providers.base import Crash
from conformance.cluster.waits import CANCELLED, WaitTimeout
from conformance.observe.invariants import SCHEDULER_FAULT, InvariantWatcher
from conformance.suite.cause import explain
from conformance.suite.context import ClusterContext
from conformance.suite.exclusive import ExclusiveGate
from conformance.suite.known import for_holders
from conformance.suite.phases import ForeignFree, register_fixture
from conformance.suite.record import REGISTRY, Scenario

SCENARIO_DEADLINE_S = 900.0
# A scenario the cluster failed under (a control-plane crash while it ran, the scheduler's double allocation among its
# objects) runs once more in fresh namespaces: the cluster's fault is SCH-11's or SCH-9's finding, and a correct stack
# must not get a run that is partial one time in ten from an upstream race (soak, 2026-12-07). Only the last attempt
# is judged; a second fault leaves the scenario not judged, as before.
ATTEMPTS = 2


@dataclass(frozen=True)
class Progress:
    """How far a failed scenario got: the steps of its record it reached, and what it had observed by then."""

    reached: tuple[str, ...] = ()
    partial: Any = None
    unread: str = ""  # why what it had observed could not be read (then nothing is judged on it)


@dataclass(frozen=True)
class ScenarioFailed:
    """What a test receives instead of the observation when its scenario failed. When the test runs, the plugin
    has suite/judged.py decide: it judges `progress.partial` (its evidence was there before the failure), fails with
    `error` (the failure is its requirement's), is not judged (its evidence is missing), or skips (a profile gap).
    Either way in the test's call phase, not as a setup ERROR."""

    error: Exception
    scenario: str = ""
    progress: Progress = Progress()


def result_fixture(fixture: str, name: str) -> Any:
    """A module fixture `fixture` that hands the tests of a module the observation of scenario `name`.
    A skip of the scenario skips the tests; a failure is handed over as ScenarioFailed (judged per test)."""
    # which scenario its tests read: their phase, and which scenarios a -k/-m selection starts
    register_fixture(sys._getframe(1).f_globals.get("__name__", ""), fixture, (name,))

    @pytest.fixture(scope="module", name=fixture)
    def observed(request: pytest.FixtureRequest) -> Any:
        # Cluster scenarios run on their own runner: they need no implementation and do not wait for it.
        runner: ScenarioRunner = request.getfixturevalue(
            "scenarios" if REGISTRY[name].implementation else "cluster_scenarios"
        )
        try:
            return runner.result(name)
        except Exception as exc:  # skips and interrupts are BaseExceptions: they pass through
            return ScenarioFailed(exc, name, runner.progress.get(name, Progress()))

    return observed


class InvariantViolated(AssertionError):
    """An invariant watched during the scenario broke; the message lists when and which objects. It is every
    requirement's of the scenario (`requirements`): it is not the failure of one step's wait."""

    def __init__(self, message: str, requirements: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.requirements = requirements


class ClusterFault(pytest.skip.Exception):  # type: ignore[misc,name-defined]
    """A scenario not judged for the cluster's fault (SCH-9's double allocation among its objects): run again."""


@dataclass
class Timing:
    start: float
    end: float | None = None
    outcome: str = "running"
    attempt: int = 1
    again: tuple[str, ...] = ()  # why each earlier attempt was run again (the cluster's fault it met)
    measured: dict[str, list[float]] = field(default_factory=dict)  # the attempt's figures (ctx.measure)


class ScenarioRunner:
    """Starts the selected scenarios at once and hands their results to the tests."""

    def __init__(
        self,
        scenarios: list[Scenario],
        make_context: Callable[[Scenario], ClusterContext],
        invariants: InvariantWatcher | None,
        say: Callable[[str], None],
        concurrency: int | None = None,
        foreign_free: ForeignFree | None = None,
        crashes: Callable[[], list[Crash] | None] | None = None,
    ) -> None:
        self.scenarios = {s.name: s for s in scenarios}
        # The foreign-free phase's gate (suite/phases.py): implementation scenarios not beside_others wait on it.
        self.foreign_free = foreign_free
        # The profile's fabricConcurrency: at most this many implementation scenarios at once (a stack that
        # attaches one device at a time would otherwise stall every scenario behind one hung attach).
        self.concurrency = concurrency
        self._slots = threading.BoundedSemaphore(concurrency) if concurrency else None
        self._gate = ExclusiveGate(sum(1 for s in scenarios if s.implementation and s.exclusive))
        self._make_context = make_context
        self._invariants = invariants
        self._say = say
        self._crashes = crashes  # the control plane's crashes so far (SCH-11's watch); None: not watched
        self._executor = ThreadPoolExecutor(max_workers=max(1, len(scenarios)), thread_name_prefix="scenario")
        self._futures: dict[str, Future[Any]] = {}
        self.timings: dict[str, Timing] = {}
        self.measurements: dict[str, list[float]] = {}
        self.progress: dict[str, Progress] = {}  # failed scenarios: how far each got
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.scenarios:
            bound = f" (at most {self.concurrency} at once: the profile's fabricConcurrency)" if self._slots else ""
            self._say(f"starting {len(self.scenarios)} scenarios side by side{bound}: {', '.join(self.scenarios)}")
        for sc in self.scenarios.values():
            self._futures[sc.name] = self._executor.submit(self._run, sc)

    def result(self, name: str) -> Any:
        """The scenario's observation; re-raises its failure or skip in the calling test."""
        if name not in self._futures:
            raise KeyError(f"scenario {name!r} was not selected in this run (known: {sorted(self._futures)})")
        return self._futures[name].result(timeout=SCENARIO_DEADLINE_S)

    def finished(self, name: str) -> Any | None:
        """The observation of scenario `name` if it ran and ended without an error, else None (for the reports)."""
        future = self._futures.get(name)
        if future is None or not future.done() or future.cancelled() or future.exception() is not None:
            return None
        return future.result()

    def failures(self) -> dict[str, str]:
        """Scenario -> the first line of its error, for every scenario that ended failed (skips are not failures)."""
        out = {}
        for name, future in self._futures.items():
            error = future.exception() if future.done() and not future.cancelled() else None
            if error is not None and not isinstance(error, pytest.skip.Exception):
                out[name] = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        return out

    def _run(self, sc: Scenario) -> Any:
        if not sc.implementation:
            return self._run_now(sc)
        if sc.beside_others:  # the coexistence phase: before every other implementation scenario, so never beside one
            return self._run_slot(sc)
        if self.foreign_free is not None:
            self.foreign_free.wait()
        with self._gate.alone() if sc.exclusive else self._gate.shared():
            return self._run_slot(sc)

    def _run_slot(self, sc: Scenario) -> Any:
        if self._slots is None:
            return self._run_now(sc)
        with self._slots:
            return self._run_now(sc)

    def wait_beside_others(self) -> list[str]:
        """Wait until every scenario of the coexistence phase has ended (cleanup included); their names."""
        names = [n for n, sc in self.scenarios.items() if sc.implementation and sc.beside_others]
        wait([self._futures[n] for n in names if n in self._futures], timeout=SCENARIO_DEADLINE_S)
        return names

    def wall(self) -> float | None:
        """Seconds from the first scenario's start to the last one's end (None before all ended)."""
        ends = [t.end for t in self.timings.values()]
        if not ends or None in ends:
            return None
        return max(e for e in ends if e is not None) - min(t.start for t in self.timings.values())

    def _run_now(self, sc: Scenario) -> Any:
        """The scenario's attempts: one, and another after an attempt the cluster failed under (ATTEMPTS)."""
        again: tuple[str, ...] = ()
        while True:
            attempt = len(again) + 1
            try:
                result = self._attempt(sc, Timing(time.time(), attempt=attempt, again=again))
            except BaseException as exc:
                fault = self._cluster_fault(sc, exc) if attempt < ATTEMPTS else None
                if fault is None:
                    self._keep_measured(sc.name)
                    raise
                again += (fault,)
                self._say(
                    f"scenario {sc.name}: {fault}: the cluster's fault, not the implementation's; running it again "
                    f"in fresh namespaces (attempt {attempt + 1} of {ATTEMPTS}, only that one is judged)"
                )
                continue
            self.progress.pop(sc.name, None)
            self._keep_measured(sc.name)
            return result

    def _keep_measured(self, name: str) -> None:
        """The figures of the judged attempt (not those of one the cluster failed under) into the run's."""
        with self._lock:
            for key, values in self.timings[name].measured.items():
                self.measurements.setdefault(key, []).extend(values)

    def _cluster_fault(self, sc: Scenario, error: BaseException) -> str | None:
        """Why the attempt that ended with `error` is the cluster's to answer for, or None (the error stands)."""
        if isinstance(error, ClusterFault):
            return str(error).strip().splitlines()[0]
        # Not skips or interrupts; not a broken invariant either: what the implementation did wrong (a device held
        # twice, a pod bound early) is its own whatever the scheduler did, and stands.
        if not isinstance(error, Exception) or isinstance(error, InvariantViolated):
            return None
        if self._crashes is None or CANCELLED.is_set():
            return None
        timing = self.timings[sc.name]
        try:
            seen = self._crashes() or []
        except Exception:  # the watch cannot answer now: the failure stands as it is
            return None
        hit = next((c for c in seen if timing.start <= c.at <= (timing.end or time.time()) and c.restarted), None)
        if hit is None:
            return None
        when = time.strftime("%H:%M:%S", time.gmtime(hit.at))
        failed = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        crashed = f"{hit.component} crashed at {when} UTC while it ran (SCH-11: {hit.cause})"
        return f"{crashed}; that attempt failed: {failed}"

    def _attempt(self, sc: Scenario, timing: Timing) -> Any:
        self.timings[sc.name] = timing
        ctx = self._make_context(sc)
        ctx.cluster.user_agent = f"{USER_AGENT}/{sc.name}"
        try:
            if reason := ctx.requirements_missing():
                pytest.skip(reason)
            try:
                result = sc.run(ctx)
            except AssertionError as exc:  # the cause first (suite/cause.py), the wait's symptom after it
                failure = explained(exc, explain(ctx, str(exc), timing.start))
                self._check_invariants(sc, ctx, timing.start, failure=failure)
                if failure is exc:
                    raise
                raise failure from exc
            self._check_invariants(sc, ctx, timing.start)
            timing.outcome = "passed"
            return result
        except pytest.skip.Exception:
            timing.outcome = "skipped"
            raise
        except BaseException:
            timing.outcome = "failed"
            self.progress[sc.name] = _progress(ctx)  # before the cleanup: what it observed is still in the record
            raise
        finally:
            failures = ctx.objects.cleanup()
            ctx.release()
            timing.measured = ctx.measurements  # kept once this attempt is the judged one (_run_now)
            ctx.cluster.close()
            timing.end = time.time()
            # "passed" would read as a verdict: a scenario only ran; its requirements are judged by its tests
            ended = "ran to its end" if timing.outcome == "passed" else timing.outcome
            self._say(f"scenario {sc.name}: {ended} in {timing.end - timing.start:.1f}s")
            if failures:
                raise AssertionError(f"scenario {sc.name}: cleanup failed: {failures}")

    def _check_invariants(
        self, sc: Scenario, ctx: ClusterContext, start: float, failure: AssertionError | None = None
    ) -> None:
        if self._invariants is None:
            return
        broken = self._invariants.since(start, ctx.namespaces, ctx.identities)
        then = f"\nand then: {failure}" if failure else ""
        if any(v.what != SCHEDULER_FAULT for v in broken):
            raise InvariantViolated(
                f"scenario {sc.name}: invariants broken while it ran:\n" + "\n".join(f"  {v}" for v in broken) + then,
                sc.requirements,
            ) from failure
        if broken:  # the cluster's fault: what the implementation did after it cannot be judged (SCH-9 fails)
            known = for_holders(ctx.record, {o for v in broken for o in v.objects}, ctx.cluster.info)
            raise ClusterFault(
                f"scenario {sc.name}: not judged: kube-scheduler allocated one device to two claims while it ran "
                f"(SCH-9, the cluster's fault, not the implementation's{'; ' + known if known else ''}):\n"
                + "\n".join(f"  {v}" for v in broken)
                + then
            )

    def say(self, message: str) -> None:
        """A line of progress on the terminal (for what judges the scenarios after they ended)."""
        self._say(message)

    def wait_all(self) -> list[str]:
        """Wait until every scenario has ended (its cleanup included); the names of those that ran."""
        wait(self._futures.values(), timeout=SCENARIO_DEADLINE_S)
        return [name for name, t in self.timings.items() if t.outcome != "skipped"]

    def join(self) -> None:
        """Wait for every scenario (their cleanup runs in their threads), then stop the pool."""
        _, running = wait(self._futures.values(), timeout=SCENARIO_DEADLINE_S)
        if running:
            stuck = [name for name, f in self._futures.items() if f in running]
            raise AssertionError(f"scenarios still running after {SCENARIO_DEADLINE_S:g}s: {stuck}")
        self._executor.shutdown(wait=True)
        if (wall := self.wall()) is not None and self._slots:
            self._say(f"{len(self.timings)} scenarios took {wall:.1f}s at most {self.concurrency} at once")


def _progress(ctx: ClusterContext) -> Progress:
    """The steps a failed scenario reached and what it had observed by then; never a reason for a second failure."""
    if not ctx.reached or ctx.observed is None:
        return Progress(tuple(ctx.reached))
    try:
        return Progress(tuple(ctx.reached), ctx.observed())
    except Exception as exc:
        return Progress(tuple(ctx.reached), unread=f"what it had observed could not be read: {exc!r}")


def explained(exc: AssertionError, message: str) -> AssertionError:
    """The scenario's failure with `message` (its cause first). A wait that ran out whose first line gave way to the
    cause is no longer reported as a WaitTimeout (the reports name the exception's type before its first line)."""
    if isinstance(exc, WaitTimeout) and message.partition("\n")[0] != str(exc).partition("\n")[0]:
        return AssertionError(message)
    exc.args = (message,)
    return exc


def summarize(values: list[float]) -> dict[str, float]:
    """median, p95, min, max and count of a measured figure."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "count": len(ordered),
        "median": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
    }
