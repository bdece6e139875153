"""SCH-10: kube-scheduler's binding-conditions metrics over the run's window, reconciled with the PreBind waits the
record saw (prebind.py); the KEP's SLI from the histogram beside the latencies the record measures.

The window opens with a scrape before the first scenario starts (MetricsRun.open) and closes with one after every
scenario has ended (settle). Per driver (every scenario has one of its own) and status, the metrics must count what
the record's waits allow: at least the waits whose end says their status, at most those whose end allows it. On a
cluster the suite started itself (local, kind) nothing else schedules: both bounds hold. On an existing cluster
others may schedule pods of the same driver names only by accident, and other drivers' waits are not the run's: only
the lower bound is judged.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.metrics import ALLOCATIONS, KEP_NAMES, STATUSES, WAIT, Scrape, Window, restarted, scrape, sli
from conformance.cluster.metrics import window as metrics_window
from conformance.cluster.providers.base import ClusterInfo
from conformance.cluster.versions import PREBIND_POLL_S, parse_version
from conformance.observe.prebind import Wait, bounds, latencies

# Providers whose cluster the suite started: every pod the scheduler saw in the window is the run's.
OWN_CLUSTER = ("local", "kind")
SETTLE_SLACK_S = 3.0  # beyond the last wait's possible end: the scheduler's last poll and the scrape


@dataclass(frozen=True)
class Row:
    driver: str
    status: str
    counted: int  # allocations_total in the window
    low: int
    high: int
    observed: int  # wait_duration_seconds observations in the window
    observed_low: int
    observed_high: int
    scenario: str = ""  # the namespaces of the driver's waits, without their random suffix (a scenario's name)

    def problems(self, exact: bool) -> list[str]:
        out = []
        for what, value, low, high in (
            (ALLOCATIONS, self.counted, self.low, self.high),
            (f"{WAIT}_count", self.observed, self.observed_low, self.observed_high),
        ):
            if value < low or (exact and value > high):
                want = f"{low}" if low == high else f"{low}..{high}" if exact else f">= {low}"
                out.append(f"{what}{{driver={self.driver},status={self.status}}} = {value}, the record says {want}")
        return out


@dataclass
class Reconciliation:
    rows: list[Row]
    exact: bool
    waits: list[Wait]
    sli: dict[str, Any]
    seconds: float  # the window's length
    # Drivers judged "at least" even on the suite's own cluster: their claims are written by the implementation or the
    # coexistence driver's fast condition writer, whose waits the record can under-count (seen: 33 counted, 29..31
    # in the record, for the coexistence driver's repeated failures).
    at_least: frozenset[str] = frozenset()

    def problems(self) -> list[str]:
        return [p for row in self.rows for p in row.problems(self.exact and row.driver not in self.at_least)]

    def table(self) -> list[str]:
        head = f"{'scenario (driver)':<62} {'status':<8} {'counted':>7} {'record':>9} {'observed':>8} {'record':>9}"
        lines = [head]
        for r in self.rows:
            rec = f"{r.low}" if r.low == r.high else f"{r.low}..{r.high}"
            obs = f"{r.observed_low}" if r.observed_low == r.observed_high else f"{r.observed_low}..{r.observed_high}"
            who = f"{r.scenario} ({r.driver.split('.')[0]})" if r.scenario else r.driver
            lines.append(f"{who:<62} {r.status:<8} {r.counted:>7} {rec:>9} {r.observed:>8} {obs:>9}")
        return lines

    def as_report(self) -> dict[str, Any]:
        ends: dict[str, int] = {}
        for w in self.waits:
            ends[w.end] = ends.get(w.end, 0) + 1
        measured = {k: _summary(v) for k, v in latencies(self.waits).items() if v}
        return {
            "judged": "equal (the suite's own cluster)" if self.exact else "at least (a shared cluster)",
            "windowSeconds": round(self.seconds, 1),
            "waits": len(self.waits),
            "waitEnds": ends,
            "rows": [row.__dict__ for row in self.rows],
            "sli": {"metric": f"{WAIT}{{status=success}}", **self.sli},
            "record": measured,
        }


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50Seconds": round(statistics.median(ordered), 3),
        "p99Seconds": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
    }


def reconcile(win: Window, waits: list[Wait], exact: bool, at_least: frozenset[str] = frozenset()) -> Reconciliation:
    """The window's counts against the record's bounds, per driver and status (every pair either side has)."""
    devices, results = bounds(waits, "devices"), bounds(waits, "results")
    keys = {*win.allocations, *win.waits, *devices.low, *devices.high, *results.low, *results.high}
    if not exact:  # a shared cluster: only the run's own drivers are judged
        mine = {w for wait in waits for w in wait.devices}
        keys = {k for k in keys if k[0] in mine}
    order = {s: i for i, s in enumerate(STATUSES)}
    scenarios: dict[str, set[str]] = {}
    for wait in waits:
        for driver in wait.devices:
            scenarios.setdefault(driver, set()).add(wait.pod.split("/")[0].rsplit("-", 1)[0])
    rows = [
        Row(
            driver,
            status,
            int(win.allocations.get((driver, status), 0)),
            devices.low.get((driver, status), 0),
            devices.high.get((driver, status), 0),
            int(win.waits.get((driver, status), 0)),
            results.low.get((driver, status), 0),
            results.high.get((driver, status), 0),
            ", ".join(sorted(scenarios.get(driver, ()))),
        )
        for driver, status in sorted(keys, key=lambda k: (k[0], order.get(k[1], 9)))
    ]
    return Reconciliation(rows, exact, waits, sli(win), win.seconds, at_least)


@dataclass
class MetricsRun:
    """The run's window on kube-scheduler's metrics: why it cannot be read, or its first scrape; once judged, the
    reconciliation (the conformance report's `schedulerMetrics`)."""

    endpoint: str | None
    info: ClusterInfo | None = None
    unreadable: str = ""  # why the metrics cannot be judged in this run ("" when they can)
    before: Scrape | None = None
    after: Scrape | None = None
    result: Reconciliation | None = None
    scrapes: int = 0
    skipped: str = ""  # what the judgement said when it did not judge
    names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, info: ClusterInfo, read: Callable[[str, Any], Scrape] = scrape) -> MetricsRun:
        release = parse_version(info.version).release
        run = cls(info.scheduler_endpoint, info)
        if not release.bindingconditions_metrics:
            run.unreadable = (
                f"kube-scheduler {release.name} has no binding-conditions metrics (added in 1.36, kubernetes PR "
                "#137284)"
            )
        elif not info.scheduler_endpoint:
            run.unreadable = (
                f"the {info.provider} provider gives no address of kube-scheduler's secure port (on an existing "
                "cluster: --scheduler-url): its /metrics cannot be read from here"
            )
        else:
            run.before = read(info.scheduler_endpoint, info.kubeconfig)
            run.scrapes += 1
            if not run.before.ok:
                run.unreadable = f"kube-scheduler's /metrics cannot be read: {run.before.error}"
        return run

    def settle(
        self,
        waits: list[Wait],
        read: Callable[[str, Any], Scrape] = scrape,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        at_least: frozenset[str] = frozenset(),
    ) -> Reconciliation:
        """Scrape once every PreBind wait the record saw has ended in the scheduler too, and reconcile. A wait whose
        end the record saw has been counted before it (the metrics are written before PreBind returns); one whose claim
        went away ends at the scheduler's next poll; one whose pod went away (or that still waits) at the latest a
        binding timeout after it began: the scrape waits for those."""
        assert self.before is not None and self.info is not None and self.endpoint
        exact = self.info.provider in OWN_CLUSTER
        timeout = float(self.info.binding_timeout_s)
        ends = [(w.end_at or clock()) + PREBIND_POLL_S for w in waits if w.end == "claim deleted"]
        ends += [w.start_at + timeout + PREBIND_POLL_S for w in waits if w.end in ("pod deleted", "open")]
        if ends and (left := max(ends) + SETTLE_SLACK_S - clock()) > 0:
            sleep(left)
        self.after = read(self.endpoint, self.info.kubeconfig)
        self.scrapes += 1
        if not self.after.ok:
            raise MetricsUnreadable(f"kube-scheduler's /metrics could not be read at the end: {self.after.error}")
        if restarted(self.before, self.after):
            raise MetricsUnreadable(
                "kube-scheduler restarted during the run (process_start_time_seconds changed): its counters "
                "started again, the window cannot be reconciled"
            )
        self.result = reconcile(metrics_window(self.before, self.after), waits, exact, at_least)
        return self.result

    def report(self) -> dict[str, Any]:
        """The conformance report's `schedulerMetrics`: the names read, the window's reconciliation and the SLI."""
        out: dict[str, Any] = {
            "source": f"{self.endpoint}/metrics" if self.endpoint else None,
            "metrics": {name: {"kep": kep} for name, kep in KEP_NAMES.items()},
        }
        if self.after is not None:
            for name in KEP_NAMES:
                out["metrics"][name]["served"] = name in self.after.families
        if self.unreadable or self.skipped:
            out["notJudged"] = self.unreadable or self.skipped
        if self.result is not None:
            out |= self.result.as_report()
        return out


class MetricsUnreadable(RuntimeError):
    """The window cannot be judged (the endpoint went away, the scheduler restarted): SCH-10 skips with this."""
