"""A stack that declares it never sets its failure conditions (promises.reportsFailures: false): the requirements on
reporting a failure are judged on that declaration and fail citing it, instead of being skipped for want of a fault
injector or a capability (gaps.profile_gap lets such a scenario run; its body returns NeverReports at once).

Why a fail and not a skip: KEP-5007 (kep-5007.md "Roles") has the controller set a failure condition True when the
attach or readying fails, and make sure the failed device is not picked again; it allows no opt-out. A stack that
never sets one leaves its pod waiting out the scheduler's bindingTimeout beside a device that failed, which the
scheduler may allocate again. The declaration is honest, and what it declares is a gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import pytest

from conformance.implementation.profile import Profile

KEP = (
    "KEP-5007 has the controller set a failure condition True when the {what} fails and make sure the failed device "
    "is not picked again (no opt-out): without it the pod waits out the scheduler's bindingTimeout and the failed "
    "device may be allocated again"
)


@dataclass(frozen=True)
class NeverReports:
    """What a failure scenario observed of a stack that declares it never reports failures: nothing to observe."""

    requirement: str
    reason: str

    def fail(self) -> NoReturn:
        pytest.fail(self.reason, pytrace=False)


def never_reports(profile: Profile, requirement: str, what: str) -> NeverReports | None:
    """The declaration `requirement` fails on, or None (the stack reports failures: the scenario runs). `what`: the
    operation whose failure the requirement is about (attach, readying)."""
    if profile.promises.reports_failures:
        return None
    return NeverReports(
        requirement,
        f"the profile declares promises.reportsFailures: false (the stack never sets its failure conditions), and "
        f"{requirement} needs a failure condition set True on a failed {what}: {KEP.format(what=what)}. Not run: "
        "the declaration is the evidence",
    )


def judge_declared(observed: object) -> None:
    """In a failure requirement's test: fail citing the declaration when the scenario returned one."""
    if isinstance(observed, NeverReports):
        observed.fail()
