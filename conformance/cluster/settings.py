"""The settings a cluster declares (feature gates, binding timeout) and the window in which a measured binding timeout
agrees with a declared one (BASE-2, SCH-6).

When kube-scheduler 1.37 times out (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go):
- bindClaim in PreBind sets allocationTimestamp = time.Now() and writes the claim; PreBind then waits with
  wait.PollUntilContextTimeout(ctx, 5s, bindingTimeout, immediate): it polls every PREBIND_POLL_S and its context
  ends bindingTimeout after the wait began, a few milliseconds (one claim write) after allocationTimestamp. A poll
  also fails early once allocationTimestamp + bindingTimeout is past (isClaimTimeout), which at most matches the
  context's end. So the "device binding timeout" error fires at allocationTimestamp + bindingTimeout + the claim
  write, and the pod's FailedScheduling event is recorded then, stamped (eventTime, microseconds) by the
  scheduler's own clock, the clock of allocationTimestamp. The API serializes allocationTimestamp to the second,
  truncated: event - allocationTimestamp is in [timeout, timeout + 1 s + the write + the recording].
- The error is the pod's first consecutive error: it goes to the backoff queue for podInitialBackoffSeconds << 0
  (backoff_queue.go calculateBackoffDuration; 1 s by default, the suite's scheduler config sets neither
  podInitialBackoffSeconds nor podMaxBackoffSeconds (10 s), and a vendor's would have to set a longer initial one
  to matter), flushed to the active queue once a second (backoffQOrderingWindowDuration).
- The next cycle's Filter finds the allocation timed out (isClaimTimeout, on the truncated timestamp: never before
  allocationTimestamp - 1 s + timeout), marks it unavailable, and PostFilter clears it with one UpdateStatus.
So the allocation is cleared no sooner than timeout - 1 s and no later than timeout + one PreBind poll (a release
whose wait only notices the timeout at a poll) + the backoff and its flush + CLEAR_SLACK_S.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.cluster.providers.base import ClusterInfo
from conformance.cluster.versions import PREBIND_POLL_S

# Gates every scenario relies on, wherever the release still has them as gates: declared on by any cluster the suite
# certifies (an existing cluster names none; the taint gates are declared where the suite passes them).
RELIED_GATES = ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus", "DRADeviceBindingConditions")
# allocationTimestamp is a metav1.Time: serialized to the second, truncated.
TIMESTAMP_RESOLUTION_S = 1.0
# The pod's first error waits podInitialBackoffSeconds (default 1 s) and the backoff queue is flushed each second.
FIRST_BACKOFF_S = 1.0
BACKOFF_FLUSH_S = 1.0
# What else lies between the error and the clear as the record sees it: the next scheduling cycle (behind whatever
# else the scheduler's queue holds), the clearing UpdateStatus, the watch's delivery to the suite. Measured on the
# 2-core machine, 1.37.2, with other suites running beside (load average 3-15), six runs of 20, 35 and 40 s: the
# whole clear came 1.1-2.0 s after the timeout, all of it within the backoff and its flush. 5 s more is headroom
# for a real cluster's busier queue: SCH-6's upper end catches a scheduler far off its timeout (BASE-2's event window
# is the tight one).
CLEAR_SLACK_S = 5.0
# Between allocationTimestamp and the start of the wait (the claim write) and the event's recording. Measured in the
# same runs: the event came 0.3-0.9 s after allocationTimestamp + timeout, the truncation to the second included.
TIMEOUT_SLACK_S = 2.0


@dataclass(frozen=True)
class Window:
    """Where a measured duration must lie for a declared timeout, with the reason for each end."""

    low: float
    high: float
    why: str

    def holds(self, seconds: float) -> bool:
        return self.low <= seconds <= self.high

    def describe(self) -> str:
        return f"[{self.low:g}, {self.high:g}] s ({self.why})"

    def miss(self, seconds: float) -> str:
        """Which end `seconds` misses, and the window: for a failure message."""
        side = f"sooner than {self.low:g} s" if seconds < self.low else f"later than {self.high:g} s"
        return f"{side}, outside {self.describe()}"


def event_window(timeout_s: float) -> Window:
    """The "binding timeout" event's eventTime minus allocationTimestamp (both the scheduler's clock)."""
    return Window(
        timeout_s,
        timeout_s + TIMESTAMP_RESOLUTION_S + TIMEOUT_SLACK_S,
        f"the timeout, + {TIMESTAMP_RESOLUTION_S:g} s for allocationTimestamp's truncation to the second "
        f"+ {TIMEOUT_SLACK_S:g} s for the claim write before the wait and the event's recording",
    )


def clear_window(timeout_s: float) -> Window:
    """The allocation's clearing minus its making, both as the suite's watch delivered them."""
    high = timeout_s + PREBIND_POLL_S + FIRST_BACKOFF_S + BACKOFF_FLUSH_S + CLEAR_SLACK_S
    return Window(
        timeout_s - TIMESTAMP_RESOLUTION_S,
        high,
        f"no sooner than the timeout less allocationTimestamp's 1 s truncation; no later than the timeout "
        f"+ one PreBind poll ({PREBIND_POLL_S:g} s) + the pod's first backoff ({FIRST_BACKOFF_S:g} s) and its flush "
        f"({BACKOFF_FLUSH_S:g} s) + {CLEAR_SLACK_S:g} s for the next cycle, the clearing write and the watch",
    )


def declared_gates(info: ClusterInfo) -> dict[str, bool]:
    """The gates a cluster declares: the relied-on ones on, then whatever the provider passed (which may turn one
    off on purpose, e.g. --feature-gates DRADeviceBindingConditions=false)."""
    return {**dict.fromkeys(RELIED_GATES, True), **info.feature_gates}
