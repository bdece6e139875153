import itertools
import re

import pytest

from conformance.cluster.waits import WaitTimeout, wait_for


def test_returns_the_observation_that_satisfied_the_condition() -> None:
    counter = itertools.count()
    assert wait_for(lambda: next(counter), lambda n: n >= 3, timeout=5, expected="three", interval=0.01) == 3


def test_timeout_names_expectation_last_observation_and_last_error() -> None:
    calls = itertools.count()

    def observe() -> str:
        if next(calls) % 2:
            raise OSError("apiserver down")
        return "phase=Pending"

    with pytest.raises(WaitTimeout) as raised:
        wait_for(observe, lambda s: s == "phase=Running", timeout=0.3, expected="pod Running", interval=0.01)
    message = str(raised.value)
    assert "pod Running" in message and "phase=Pending" in message and "apiserver down" in message


def test_a_bug_in_the_observer_is_raised_at_once() -> None:
    def observe() -> None:
        raise TypeError("wrong call")

    with pytest.raises(TypeError):
        wait_for(observe, bool, timeout=30, expected="never", interval=0.01)


def test_a_wait_that_progresses_goes_on_past_any_deadline_and_fails_only_on_a_stall() -> None:
    from conformance.cluster.waits import wait_while_progressing

    counter = itertools.count()
    done = wait_while_progressing(
        lambda: next(counter), lambda n: n >= 20, lambda n: n, stall=0.05, expected="twenty", interval=0.01
    )
    assert done == 20  # 20 polls took longer than the stall allowance, but each one made progress
    with pytest.raises(WaitTimeout, match=re.escape("no progress for 0.05s waiting for seven\nlast seen: 3 of 7")):
        wait_while_progressing(
            lambda: 3,
            lambda n: n >= 7,
            lambda n: n,
            stall=0.05,
            expected="seven",
            describe=lambda n: f"{n} of 7",
            interval=0.01,
        )
