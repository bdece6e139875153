"""The implementation is judged in two phases: beside other drivers' binding-condition claims (coexistence, IMP-17),
and with none live (every other implementation requirement).

A real cluster runs several DRA drivers, and a stack that breaks on another driver's claim (CoHDI's device scaler
aborted its whole reconcile on a pool it did not know) has ONE root cause: IMP-17 fails with it. Were the other
requirements judged while such claims are live, each would fail with that same cause, and the stack's other gaps
(a missing right, a detach that stalls, attach failures never reported) would stay hidden behind it. So:

- coexistence: from the start of the run the suite's cluster scenarios keep claims of their own drivers live (their
  pools, e.g. `a-fabric`), the API tests allocate claims by hand, and from the implementation's readiness another
  driver (suite/others.py) keeps claims in every binding state. Among the implementation scenarios only those that
  judge coexistence (`Scenario.beside_others`) run now.
- foreign-free: opens once those scenarios and the cluster scenarios have ended, the cluster's plain API tests are
  done, the other driver's objects are deleted, and the record shows no live claim allocated with another driver's
  binding conditions (waited for, bounded: what was still live is said, never hidden). Every other implementation
  scenario runs in it, and what the implementation owes is counted again from its opening (PublishLog.rebase): a
  stack that could not publish while other drivers' claims were live gets its promise anew.

Each requirement's report names the phase it was judged in (`PHASES`; `phase_of` for a test's scenarios).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.waits import CANCELLED, Cancelled
from conformance.suite.record import Scenario

COEXISTENCE = "coexistence"
FOREIGN_FREE = "foreign-free"
WHOLE_RUN = "whole-run"
CLUSTER = "cluster"
PHASES = {
    COEXISTENCE: "beside other drivers' binding-condition claims (the suite's cluster scenarios' and another "
    "driver's, every binding state)",
    FOREIGN_FREE: "no other driver's binding-condition claim live",
    WHOLE_RUN: "over the whole run's record, both implementation phases",
    CLUSTER: "the cluster's scenarios and API tests, with suite-owned drivers (while the implementation starts and "
    "coexistence is judged)",
}
# (module, fixture) -> the scenarios whose observation a result fixture hands over (runner.result_fixture,
# implementation/shape.shaped_fixture register here): the phase of a test is that of the scenarios it reads, and a
# selection (-k/-m) starts the scenarios its tests read (session/requirements.py). By module: several name theirs `run`.
FIXTURES: dict[tuple[str, str], tuple[str, ...]] = {}
FOREIGN_FREE_FIXTURE = "foreign_free_phase"  # a plain test judged in the foreign-free phase waits on it
CLUSTER_SUITE = "conformance.suite.cluster"  # the modules of the cluster's requirements (suite-owned drivers)
FOREIGN_GONE_S = 120.0  # the longest the foreign-free phase waits for other drivers' claims to be deleted
_TICK_S = 0.5


def judged_in(phase: str) -> str:
    """The phase in words, as a requirement's reason ends with it."""
    if phase == WHOLE_RUN:
        return f"judged {PHASES[WHOLE_RUN]}"
    return f"judged in the {phase} phase: {PHASES.get(phase, phase)}"


def register_fixture(module: str, fixture: str, scenarios: tuple[str, ...]) -> None:
    FIXTURES[(module, fixture)] = scenarios


def scenarios_read(module: str, fixtures: Iterable[str]) -> set[str]:
    """The scenarios whose observations a test of `module` reads through these fixtures (result_fixture's)."""
    return {n for f in fixtures for n in FIXTURES.get((module, f), ())}


def phase_of(scenarios: Iterable[Scenario], run_wide: bool = False) -> str:
    """The phase a test reading these scenarios is judged in (a run-wide judgement: the whole run)."""
    found = list(scenarios)
    if run_wide or not found:
        return WHOLE_RUN
    if all(not sc.implementation for sc in found):
        return CLUSTER
    return COEXISTENCE if all(sc.beside_others for sc in found if sc.implementation) else FOREIGN_FREE


def phase_of_test(
    module: str, fixtures: Iterable[str], registry: dict[str, Scenario], run_wide: bool, cluster: bool
) -> str:
    """The phase of one test: that of the scenarios its fixtures hand over; a test that reads none is judged over
    the whole record (run-wide judgements of an implementation module) or is a plain cluster test (API-*)."""
    fixtures = list(fixtures)
    scenarios = [registry[n] for n in sorted(scenarios_read(module, fixtures)) if n in registry]
    if not scenarios and cluster and not run_wide:
        return CLUSTER
    if not scenarios and not run_wide and FOREIGN_FREE_FIXTURE in fixtures:
        return FOREIGN_FREE
    return phase_of(scenarios, run_wide)


def foreign_claims(claims: Iterable[dict[str, Any]], driver: str) -> list[str]:
    """Live claims allocated with a device of another driver that carries binding conditions, in words."""
    out = []
    for claim in claims:
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        gated = [r for r in results if r.get("driver") != driver and r.get("bindingConditions")]
        others = sorted({r.get("driver", "") for r in gated})
        if others:
            meta = claim.get("metadata") or {}
            out.append(f"{meta.get('namespace')}/{meta.get('name')} ({', '.join(others)})")
    return sorted(out)


@dataclass
class ForeignFree:
    """The gate of the foreign-free phase: implementation scenarios other than coexistence wait on it (runner.py)."""

    opened_at: float | None = None
    waited_s: float = 0.0  # from the end of the coexistence phase's work until no foreign claim was live
    left: list[str] = field(default_factory=list)  # foreign claims still live when it opened anyway (bound ran out)
    note: str = ""  # how it opened (what it waited for), for the report and the terminal
    publish_deadline: float | None = None  # promises.publishSeconds counted from its opening (PublishLog.rebase)
    _opened: threading.Event = field(default_factory=threading.Event)

    def open(self, note: str = "", left: list[str] | None = None, waited_s: float = 0.0) -> None:
        if self._opened.is_set():
            return
        self.note, self.left, self.waited_s = note, list(left or []), round(waited_s, 2)
        self.opened_at = time.time()
        self._opened.set()

    @property
    def is_open(self) -> bool:
        return self._opened.is_set()

    def wait(self) -> None:
        """Until the phase opens (the run's cancellation stops the wait)."""
        while not self._opened.wait(_TICK_S):
            if CANCELLED.is_set():
                raise Cancelled("the run was interrupted while the scenario waited for the foreign-free phase")

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"opened": self.opened_at is not None, "waitedSeconds": self.waited_s, "how": self.note}
        if self.left:
            out["foreignClaimsStillLive"] = self.left
        return out


@dataclass
class Switch:
    """What the foreign-free phase waits for, in order (session/scenarios.py wires them): each a callable that
    blocks until its part has ended and returns a short note, and the live foreign claims to wait out."""

    steps: list[tuple[str, Callable[[], str]]]
    foreign: Callable[[], list[str]]
    say: Callable[[str], None]
    timeout_s: float = FOREIGN_GONE_S

    def run(self, gate: ForeignFree) -> None:
        """Wait for every step, then for no live foreign claim (at most timeout_s), then open the gate. Always opens
        it, also when a step fails (said in its note): a scenario must never wait for a phase that never comes."""
        began, notes = time.time(), []
        try:
            for name, step in self.steps:
                if said := step():
                    notes.append(f"{name}: {said}")
            waited = time.time()
            left = self.foreign()
            while left and time.time() - waited < self.timeout_s and not CANCELLED.is_set():
                time.sleep(_TICK_S)
                left = self.foreign()
            if left:
                notes.append(f"{len(left)} claims of other drivers still live after {self.timeout_s:g}s: {left[:5]}")
            gate.open("; ".join(notes), left, time.time() - began)
        except Exception as exc:  # open anyway, saying why: never leave the phase's scenarios waiting
            gate.open(f"opened after an error while waiting for it: {exc!r}; " + "; ".join(notes), [], 0.0)
        self.say(
            f"foreign-free phase: opened after {time.time() - began:.1f}s"
            + (f" ({gate.note})" if gate.note else "")
            + (f"; STILL LIVE: {gate.left[:3]}" if gate.left else "; no other driver's binding-condition claim live")
        )

    def start(self, gate: ForeignFree) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(gate,), name="foreign-free-switch", daemon=True)
        thread.start()
        return thread
