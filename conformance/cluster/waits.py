"""Waiting on a cluster: poll with a deadline, and fail saying what was expected and what was last seen."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential
from urllib3.exceptions import HTTPError

T = TypeVar("T")

# Failures to observe that mean "not there yet" (API starting, object not created yet). Anything else is a
# bug in the observer and is raised at once instead of being retried until the deadline.
TRANSIENT: tuple[type[BaseException], ...] = (ApiException, OSError, HTTPError)


# Set when the run is interrupted (Ctrl-C, SIGTERM): every wait of every scenario thread stops at its next poll, so
# the scenarios clean up and the cluster goes down now, not when their deadlines pass.
CANCELLED = threading.Event()


class Cancelled(RuntimeError):
    """The run was interrupted while this wait was going on."""


def check_cancelled() -> None:
    if CANCELLED.is_set():
        raise Cancelled("the run was interrupted")


class WaitTimeout(AssertionError):
    """A condition did not hold within its deadline. An AssertionError so pytest reports it as a failure."""


def wait_for(
    observe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    expected: str,
    describe: Callable[[T | None], str] = repr,
    interval: float = 0.2,
    max_interval: float = 2.0,
    transient: tuple[type[BaseException], ...] = TRANSIENT,
) -> T:
    """Call `observe` until `done(observed)` is true; return the observation.

    `transient` exceptions from `observe` count as "not yet" (the API may be starting) and are shown if the
    deadline passes; any other exception propagates at once. The poll interval backs off from `interval` to
    `max_interval`.
    """
    last: list[T | None] = [None]
    errors: list[BaseException] = []

    def attempt() -> bool:
        check_cancelled()
        try:
            last[0] = observe()
        except transient as exc:
            errors.append(exc)
            return False
        return done(last[0])  # type: ignore[arg-type]

    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=interval, min=interval, max=max_interval),
        retry=retry_if_result(lambda ok: not ok),
    )
    try:
        retrying(attempt)
    except RetryError:
        seen = describe(last[0]) if last[0] is not None else "nothing observed"
        error = f"\nlast error: {errors[-1]!r}" if errors else ""
        raise WaitTimeout(f"timed out after {timeout:g}s waiting for {expected}\nlast seen: {seen}{error}") from None
    return last[0]  # type: ignore[return-value]


def wait_while_progressing(
    observe: Callable[[], T],
    done: Callable[[T], bool],
    progress: Callable[[T], int],
    *,
    stall: float,
    expected: str,
    describe: Callable[[T], str] = repr,
    interval: float = 1.0,
) -> T:
    """Call `observe` every `interval` until `done`; fail only once `progress` (a count that grows as the work gets
    done) has not grown for `stall` seconds. For work whose length depends on the machine's load (a benchmark on a
    shared machine), where any fixed deadline is either too short or hides a hang. Transient errors are "not yet"."""
    best, since = -1, time.monotonic()
    last: T | None = None
    while True:
        check_cancelled()
        try:
            last = observe()
        except TRANSIENT:
            pass
        else:
            if done(last):
                return last
            if (count := progress(last)) > best:
                best, since = count, time.monotonic()
        if time.monotonic() - since > stall:
            seen = describe(last) if last is not None else "nothing observed"
            raise WaitTimeout(f"no progress for {stall:g}s waiting for {expected}\nlast seen: {seen}")
        time.sleep(interval)
