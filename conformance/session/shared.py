"""What the session's parts share through pytest's config: the stash keys, the run's phase marks and progress lines."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pytest

from conformance.cluster.providers import ClusterInfo
from conformance.cluster.providers.base import Crash
from conformance.implementation.profile import LoadedProfile
from conformance.report.evidence import Evidence
from conformance.suite.others import OtherDrivers
from conformance.suite.phases import ForeignFree
from conformance.suite.scenario import Scenario, ScenarioRunner

PROFILE_KEY = pytest.StashKey[LoadedProfile | None]()
CLUSTER_KEY = pytest.StashKey[tuple[ClusterInfo, dict[str, float]]]()
# The control-plane components that exited on their own so far; None where the provider does not watch them (SCH-11).
CRASHES_KEY = pytest.StashKey[Callable[[], list[Crash] | None]]()
SELECTED_KEY = pytest.StashKey[list[Scenario]]()
RUNNER_KEY = pytest.StashKey[ScenarioRunner]()
CLUSTER_RUNNER_KEY = pytest.StashKey[ScenarioRunner]()
EVIDENCE_KEY = pytest.StashKey[Evidence]()
# Moments of the run, in seconds from pytest's start (where the wall goes: bring-up, implementation start, device read
# settle, scenarios, teardown, reports); in the run report as `phases` and printed in the terminal summary.
MARKS_KEY = pytest.StashKey[dict[str, float]]()
READY_KEY = pytest.StashKey[float]()  # time.time() when the implementation was ready
OTHERS_KEY = pytest.StashKey[OtherDrivers]()  # the other driver live beside the implementation (IMP-17)
# Set once pytest's own thread is past the plain cluster tests (API-*: claims allocated by hand with binding conditions
# of suite-owned drivers): the foreign-free phase waits for it (suite/phases.py).
CLUSTER_TESTS_DONE_KEY = pytest.StashKey[threading.Event]()
FOREIGN_FREE_KEY = pytest.StashKey[ForeignFree]()  # the gate of the foreign-free phase
NO_PROFILE = "none"
NO_PROFILE_REASON = "no implementation profile (--profile none): this run certifies the cluster only"
REPORTER = "dra-conformance-requirements"  # the name the requirement reporter is registered under
CRASH_WINDOW = "dra-conformance-crash-window"  # the name the crash window's call wrapper is registered under


def mark(config: pytest.Config, moment: str, seconds: float | None = None) -> None:
    """Note when a phase of the run ended, now or `seconds` from the start (the first time only)."""
    reporter = config.pluginmanager.get_plugin(REPORTER)
    if reporter is not None:
        at = time.monotonic() - reporter.started if seconds is None else seconds
        config.stash.setdefault(MARKS_KEY, {}).setdefault(moment, round(at, 2))


def progress(config: pytest.Config) -> Callable[[str], None]:
    """Progress of long phases (build, cluster start) on the terminal, past pytest's output capture."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def say(message: str) -> None:
        if reporter is None or capture is None:
            print(message, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[dra-conformance] {message}")

    return say
