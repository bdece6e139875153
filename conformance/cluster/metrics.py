"""kube-scheduler's binding-conditions metrics, read from its /metrics: one scrape, the difference of two, and the
quantiles of a histogram's buckets.

What the binaries serve (read in kube-scheduler's sources, pkg/scheduler/metrics/metrics.go and the DynamicResources
plugin's PreBind, 1.36.3 and 1.37.2, and on a running 1.37.2), which is not what the KEP's PRR text names:
- `scheduler_dra_bindingconditions_allocations_total{profile,driver,status}`: counter; +1 per allocated device result
  WITH binding conditions, of every claim of the pod, each time a PreBind waited on binding conditions and ended;
- `scheduler_dra_bindingconditions_wait_duration_seconds{profile,driver,status}`: histogram (buckets 0.1 s * 2^k,
  14 of them); one observation per allocated device result (with binding conditions or not) of every claim of the
  pod, for the same PreBind waits. The KEP names it `..._prebind_duration_seconds` with a `requires_bindingconditions`
  label: there is no such label, and a PreBind that did not wait (no binding conditions) is observed by neither.
`status` is success, failure, timeout or error (a claim that could not be read, e.g. deleted while its pod waited).
Both are registered only where DRADeviceBindingConditions is on, from 1.36 (kubernetes PR #137284); a vector with no
observation yet is absent from the exposition, so absence alone does not say a release lacks them (versions.py does).
"""

from __future__ import annotations

import math
import re
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.cluster.running import _LABEL_RE, ComponentClient

ALLOCATIONS = "scheduler_dra_bindingconditions_allocations_total"
WAIT = "scheduler_dra_bindingconditions_wait_duration_seconds"
# What KEP-5007's PRR questionnaire calls them (reported beside the real names).
KEP_NAMES = {
    ALLOCATIONS: "scheduler_dra_bindingconditions_allocations_total{status}",
    WAIT: "scheduler_dra_bindingconditions_prebind_duration_seconds{status,requires_bindingconditions}",
}
STATUSES = ("success", "failure", "timeout", "error")
START = "process_start_time_seconds"
_SERIES_RE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)", re.MULTILINE)

Key = tuple[str, str]  # (driver, status)


@dataclass
class Scrape:
    """The binding-conditions series of one GET of kube-scheduler's /metrics, summed over scheduler profiles."""

    at: float
    source: str
    error: str = ""  # why it could not be read ("" when it was)
    allocations: dict[Key, float] = field(default_factory=dict)
    waits: dict[Key, float] = field(default_factory=dict)  # the histogram's _count
    wait_sum: dict[Key, float] = field(default_factory=dict)
    buckets: dict[Key, dict[float, float]] = field(default_factory=dict)  # le -> cumulative count
    started: float | None = None  # process_start_time_seconds: another value means a restart (counters reset)
    families: set[str] = field(default_factory=set)  # the binding-conditions families present

    @property
    def ok(self) -> bool:
        return not self.error


def parse(text: str, at: float = 0.0, source: str = "") -> Scrape:
    """The binding-conditions series of a Prometheus text exposition."""
    scrape = Scrape(at, source)
    for match in _SERIES_RE.finditer(text):
        name, value = match["name"], float(match["value"])
        labels = dict(_LABEL_RE.findall(match["labels"] or ""))
        if name == START:
            scrape.started = value
            continue
        key = (labels.get("driver", ""), labels.get("status", ""))
        if name == ALLOCATIONS:
            scrape.families.add(ALLOCATIONS)
            scrape.allocations[key] = scrape.allocations.get(key, 0.0) + value
        elif name == f"{WAIT}_count":
            scrape.families.add(WAIT)
            scrape.waits[key] = scrape.waits.get(key, 0.0) + value
        elif name == f"{WAIT}_sum":
            scrape.wait_sum[key] = scrape.wait_sum.get(key, 0.0) + value
        elif name == f"{WAIT}_bucket" and "le" in labels:
            le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
            bucket = scrape.buckets.setdefault(key, {})
            bucket[le] = bucket.get(le, 0.0) + value
    return scrape


def scrape(endpoint: str, kubeconfig: Path) -> Scrape:
    """GET `endpoint`/metrics with the kubeconfig's credentials (as BASE-2 reads the scheduler's gates)."""
    url = f"{endpoint}/metrics"
    try:
        client = ComponentClient(kubeconfig)
    except (ValueError, KeyError, StopIteration, OSError, ssl.SSLError) as exc:
        return Scrape(time.time(), url, error=f"no credentials to present: {exc}")
    try:
        return parse(client.get(url), time.time(), url)
    except OSError as exc:
        return Scrape(time.time(), url, error=f"GET {url}: {exc}")
    finally:
        client.close()


def _minus(after: dict[Key, float], before: dict[Key, float]) -> dict[Key, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


@dataclass(frozen=True)
class Window:
    """What the metrics counted between two scrapes of one scheduler process."""

    allocations: dict[Key, float]
    waits: dict[Key, float]
    buckets: dict[Key, dict[float, float]]
    seconds: float

    def total(self, table: str, status: str | None = None, driver: str | None = None) -> float:
        values: dict[Key, float] = getattr(self, table)
        return sum(v for (d, s), v in values.items() if status in (None, s) and driver in (None, d))


def window(before: Scrape, after: Scrape) -> Window:
    buckets = {}
    for key, bucket in after.buckets.items():
        old = before.buckets.get(key, {})
        buckets[key] = {le: n - old.get(le, 0.0) for le, n in bucket.items()}
    return Window(
        _minus(after.allocations, before.allocations), _minus(after.waits, before.waits), buckets, after.at - before.at
    )


def restarted(before: Scrape, after: Scrape) -> bool:
    """The scheduler process changed between the scrapes (its counters started again)."""
    return None not in (before.started, after.started) and before.started != after.started


def merged_buckets(buckets: Iterable[dict[float, float]]) -> dict[float, float]:
    out: dict[float, float] = {}
    for bucket in buckets:
        for le, n in bucket.items():
            out[le] = out.get(le, 0.0) + n
    return out


def quantile(bucket: dict[float, float], q: float) -> float | None:
    """The q-quantile of a cumulative histogram, interpolated linearly inside its bucket (as PromQL's
    histogram_quantile); the highest finite bound where it falls in the +Inf bucket; None without observations."""
    bounds = sorted(bucket)
    if not bounds or bucket[bounds[-1]] <= 0:
        return None
    rank = q * bucket[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        count = bucket[le]
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = le, count
    return lower


def sli(win: Window, status: str = "success") -> dict[str, Any]:
    """The KEP's SLI (PreBind wait with status=success) from the histogram: p50, p99 and how many observations."""
    bucket = merged_buckets(b for (_d, s), b in win.buckets.items() if s == status)
    count = win.total("waits", status)
    p50, p99 = quantile(bucket, 0.5), quantile(bucket, 0.99)
    return {
        "count": int(count),
        "p50Seconds": None if p50 is None else round(p50, 3),
        "p99Seconds": None if p99 is None else round(p99, 3),
    }
