"""The pytest side of interrupts: announce a Ctrl-C or SIGTERM once, cut its traceback, report a phase it broke as
interrupted, and shield teardown (the signal plumbing itself is conformance/cluster/interrupts.py)."""

from __future__ import annotations

import pytest

from conformance.cluster import interrupts
from conformance.cluster.waits import CANCELLED

_FULL_TRACE = [False]  # pytest --full-trace, for the interrupt hook (which gets no config)


def install(config: pytest.Config) -> None:
    """SIGINT and SIGTERM stop the run at once; the implementation's and the cluster's teardown still run (shielded)."""
    interrupts.install()
    _ANNOUNCED.clear()  # once per run, also for runs in one process (pytester)
    _FULL_TRACE[0] = bool(config.getoption("fulltrace", False))


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C or SIGTERM: say so at once, and stop the scenario threads' waits, so teardown does not wait for their
    deadlines. pytest then renders the interrupt's traceback (only its last line is shown): cut to that line, which
    took seconds on a busy machine (--full-trace keeps it whole)."""
    if excinfo.type is not KeyboardInterrupt:  # pytest's own stops (collection errors, -x) come here too
        return
    _announce_interrupt()
    if not _FULL_TRACE[0]:
        excinfo.traceback = excinfo.traceback[-1:]


_ANNOUNCED: list[bool] = []


def _announce_interrupt() -> None:
    """Once per run: the run is stopping, and what it will still do."""
    CANCELLED.set()
    if _ANNOUNCED:
        return
    _ANNOUNCED.append(True)
    interrupts.say(  # not through pytest's capture, which shows a phase's output only for a failure
        f"interrupted ({interrupts.interrupted() or 'SIGINT'}): stopping the scenarios, "
        "the implementation and the cluster; the reports will cover what ran"
    )


def swallowed_interrupt(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> bool:
    """A phase that failed because the interrupt landed inside a library that turned it into its own error
    (pydantic builds the kubernetes client's validators lazily and wraps a KeyboardInterrupt raised meanwhile in a
    SchemaError): report it as interrupted, not as a finding, and stop the run after this test as the interrupt
    asked."""
    if not (report.failed and call.excinfo is not None and interrupts.arrived_between(call.start, call.stop)):
        return False
    stopped_by = f"interrupted by {interrupts.interrupted()}"
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {stopped_by} ({call.excinfo.typename})")
    item.session.shouldstop = stopped_by
    _announce_interrupt()
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish() -> None:
    """Only teardown is left (the implementation, the cluster): a signal now must not cut it short."""
    interrupts.shield_from_now_on()
