"""The components' own figures for one wave: the share of kube-scheduler's and kube-apiserver's cumulative histograms
observed between the scrapes before and after it, as p50/p99. The binding-condition histograms are found by name
pattern in what the running scheduler serves (its real names win over what the KEP text says), and named so in the
figures."""

from __future__ import annotations

from typing import Any

from conformance.scale.metrics import Labels, counter, histogram, label_names, label_values, names, summary

Samples = dict[str, dict[Labels, float]]

ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"  # scheduling cycle + binding cycle (PreBind's wait too)
ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"  # the scheduling cycle's filter and score only
CYCLE_POINTS = ("PreFilter", "Filter", "Score")  # where a scheduling cycle spends its time (DRA: Filter)
EXTENSION_POINT = "scheduler_framework_extension_point_duration_seconds"
# KEP-5007: scheduler_dra_bindingconditions_prebind_duration_seconds; 1.37.2 serves ..._wait_duration_seconds.
BINDING_CONDITIONS = r"^scheduler_dra_bindingconditions_.*duration_seconds"
BINDING_ALLOCATIONS = r"^scheduler_dra_bindingconditions_.*_total$"
REQUESTS = "apiserver_request_duration_seconds"
MS = 1000.0


def _delta(after: Samples, before: Samples, name: str, **where: str) -> Any:
    def matches(labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in where.items())

    return histogram(after, name, matches).minus(histogram(before, name, matches))


def scheduler_figures(before: Samples, after: Samples) -> dict[str, Any]:
    """Scheduling attempts (ms) by result, PreBind (s) by status, and every binding-conditions histogram (s) by its
    result label, over one wave."""
    if not after:
        return {"unreadable": "kube-scheduler's /metrics could not be read"}
    out: dict[str, Any] = {"schedulingAttemptMs": {}, "preBindSeconds": {}, "bindingConditions": {}}
    if (h := _delta(after, before, ALGORITHM)).count > 0:  # the scheduler's own latency, no wait in it
        out["algorithmMs"] = summary(h, MS)
    for point in CYCLE_POINTS:
        if (h := _delta(after, before, EXTENSION_POINT, extension_point=point)).count > 0:
            out.setdefault("extensionPointMs", {})[point] = summary(h, MS)
    for result in label_values(after, f"{ATTEMPT}_count", "result"):
        h = _delta(after, before, ATTEMPT, result=result)
        if h.count > 0:
            out["schedulingAttemptMs"][result] = summary(h, MS)
    for status in label_values(after, f"{EXTENSION_POINT}_count", "status"):
        h = _delta(after, before, EXTENSION_POINT, extension_point="PreBind", status=status)
        if h.count > 0:
            out["preBindSeconds"][status] = summary(h)
    for family in names(after, BINDING_CONDITIONS):  # 1.37.2: labels driver, profile, status
        labels = label_names(after, f"{family}_count")
        key = next((k for k in ("status", "result") if k in labels), "")
        per = {}
        for value in label_values(after, f"{family}_count", key) if key else [""]:
            h = _delta(after, before, family, **({key: value} if key else {}))
            if h.count > 0:
                per[value or "all"] = summary(h)
        out["bindingConditions"][family] = per
    for family in names(after, BINDING_ALLOCATIONS):
        out.setdefault("counters", {})[family] = counter(after, family, lambda _: True) - counter(
            before, family, lambda _: True
        )
    return out


def served_names(samples: Samples) -> dict[str, list[str]]:
    """The scheduler's binding-condition and PreBind families as it serves them, with their labels: the names the
    figures quote, read from the running binary rather than assumed."""
    found = names(samples, BINDING_CONDITIONS) + names(samples, BINDING_ALLOCATIONS) + [ATTEMPT, EXTENSION_POINT]
    return {
        n: label_names(samples, f"{n}_count" if f"{n}_count" in samples else n)
        for n in found
        if f"{n}_count" in samples or n in samples
    }


def apiserver_figures(before: Samples, after: Samples) -> dict[str, Any]:
    """kube-apiserver's request latency (ms) for writes of resourceclaims' status, by verb, over one wave."""
    out: dict[str, Any] = {}
    for verb in ("PUT", "PATCH", "APPLY"):
        h = _delta(after, before, REQUESTS, resource="resourceclaims", subresource="status", verb=verb)
        if h.count > 0:
            out[verb] = summary(h, MS)
    return out
