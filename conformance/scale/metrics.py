"""Histograms from the components' own /metrics: parse the Prometheus text exposition, subtract two scrapes (one
wave's share of a cumulative histogram), and read quantiles from the buckets as Prometheus' histogram_quantile does.

Pure functions; the scrape itself is `Scraper` at the end (kube-scheduler's secure port with the run's client
certificate, kube-apiserver's /metrics through the API). A small one of its own: the metrics scraper of issue 38
(cluster requirement) may replace it once both are merged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs: hashable

_SAMPLE_RE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, dict[Labels, float]]:
    """Every sample of an exposition: metric name -> labels -> value (comments and blank lines skipped)."""
    out: dict[str, dict[Labels, float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_RE.match(line)
        if not match:
            continue
        labels = tuple(sorted(_LABEL_RE.findall(match["labels"] or "")))
        out.setdefault(match["name"], {})[labels] = float(match["value"])
    return out


@dataclass
class Histogram:
    """One histogram series (or several merged): cumulative counts per upper bound, the sum and the count."""

    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count (le=+Inf included)
    sum: float = 0.0
    count: float = 0.0

    def minus(self, before: Histogram) -> Histogram:
        """What was observed between two scrapes of the same series."""
        return Histogram(
            {le: n - before.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.sum - before.sum,
            self.count - before.count,
        )

    def quantile(self, q: float) -> float | None:
        """histogram_quantile(q): linear inside the bucket the rank falls in; the highest finite bound when it falls
        in the +Inf bucket; None without observations."""
        if self.count <= 0 or not self.buckets:
            return None
        bounds = sorted(self.buckets)
        rank = q * self.buckets[bounds[-1]]
        lower, below = 0.0, 0.0
        for le in bounds:
            cumulative = self.buckets[le]
            if cumulative >= rank:
                if math.isinf(le):
                    return lower
                inside = cumulative - below
                return le if inside <= 0 else lower + (le - lower) * (rank - below) / inside
            lower, below = le, cumulative
        return lower

    def overflows(self, q: float) -> bool:
        """True when the q-quantile lies above the highest finite bound (histogram_quantile then answers that
        bound: the histogram cannot say more)."""
        finite = [le for le in self.buckets if not math.isinf(le)]
        return self.count > 0 and bool(finite) and q * self.count > self.buckets[max(finite)]

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None


def histogram(
    samples: dict[str, dict[Labels, float]], name: str, where: Callable[[dict[str, str]], bool] = lambda _: True
) -> Histogram:
    """The series of histogram `name` whose labels satisfy `where`, merged (their buckets added)."""
    out = Histogram()
    for labels, value in samples.get(f"{name}_bucket", {}).items():
        d = dict(labels)
        le = d.pop("le", "+Inf")
        if where(d):
            bound = math.inf if le in ("+Inf", "Inf") else float(le)
            out.buckets[bound] = out.buckets.get(bound, 0.0) + value
    for suffix in ("sum", "count"):
        total = sum(v for labels, v in samples.get(f"{name}_{suffix}", {}).items() if where(dict(labels)))
        setattr(out, suffix, total)
    return out


def counter(samples: dict[str, dict[Labels, float]], name: str, where: Callable[[dict[str, str]], bool]) -> float:
    return sum(v for labels, v in samples.get(name, {}).items() if where(dict(labels)))


def label_values(samples: dict[str, dict[Labels, float]], name: str, label: str) -> list[str]:
    """The values one label takes in a metric (what a component really exposes, e.g. a histogram's results)."""
    return sorted({dict(labels).get(label, "") for labels in samples.get(name, {})})


def label_names(samples: dict[str, dict[Labels, float]], name: str) -> list[str]:
    """The label names a metric's series carry (le excluded)."""
    return sorted({k for labels in samples.get(name, {}) for k, _ in labels if k != "le"})


def names(samples: dict[str, dict[Labels, float]], pattern: str) -> list[str]:
    """Metric families (without _bucket/_sum/_count) whose name matches `pattern`."""
    found = {re.sub(r"_(bucket|sum|count)$", "", n) for n in samples if re.search(pattern, n)}
    return sorted(found)


def summary(h: Histogram, scale: float = 1.0) -> dict[str, float | int | str | None]:
    """count, p50, p99, mean of a histogram, in the unit `scale` turns seconds into (1000: ms). A quantile above the
    highest finite bucket is given as ">bound" (the mean, from the sum, still says how far above)."""

    def scaled(v: float | None) -> float | None:
        return None if v is None else round(v * scale, 4)

    def q(p: float) -> float | str | None:
        value = scaled(h.quantile(p))
        return f">{value:g}" if h.overflows(p) else value

    return {"count": int(h.count), "p50": q(0.5), "p99": q(0.99), "mean": scaled(h.mean)}


@dataclass
class Scraper:
    """Reads kube-scheduler's /metrics (its own port, the kubeconfig's client certificate) and kube-apiserver's
    (through the API)."""

    scheduler_url: str | None
    kubeconfig: Path
    apiserver_get: Callable[[str], str]

    def scheduler(self) -> dict[str, dict[Labels, float]]:
        if not self.scheduler_url:
            return {}
        from conformance.cluster.running import ComponentClient

        reader = ComponentClient(self.kubeconfig)
        try:
            return parse(reader.get(f"{self.scheduler_url}/metrics"))
        finally:
            reader.close()

    def apiserver(self) -> dict[str, dict[Labels, float]]:
        return parse(self.apiserver_get("/metrics"))

    def both(self) -> tuple[dict[str, dict[Labels, float]], dict[str, dict[Labels, float]]]:
        return self.scheduler(), self.apiserver()


def merged(items: Iterable[Histogram]) -> Histogram:
    out = Histogram()
    for h in items:
        for le, n in h.buckets.items():
            out.buckets[le] = out.buckets.get(le, 0.0) + n
        out.sum += h.sum
        out.count += h.count
    return out
