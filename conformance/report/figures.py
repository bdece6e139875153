"""Print the benchmark figures of one suite run from its conformance report (`make bench`).

Figures, not verdicts: bring-up, suite wall time, per-scenario times, attach-to-bind latency (ready-to-bind for a
node-local readiness gate, where nothing is attached), and SCALE-1 throughput with and without binding conditions,
with their ratio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def figures(report: dict[str, Any]) -> list[str]:
    cluster = report.get("cluster", {})
    lines = [
        f"Kubernetes {cluster.get('kubernetes', '?')} ({cluster.get('provider', '?')}), "
        f"profile {report.get('implementation', {}).get('profile', '?')}, result {report.get('result')}",
        f"cluster bring-up            {cluster.get('bringUpSeconds', 0):8.1f} s",
        f"suite wall time             {report.get('wallSeconds', 0):8.1f} s",
    ]
    phases = report.get("phases") or {}
    if phases:  # moments of the run in seconds from its start: where the wall goes
        lines.append("run phases (s from start):  " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
    scenarios = report.get("scenarios", {})
    if scenarios:
        lines.append("scenarios (side by side):")
        for name, entry in sorted(scenarios.items(), key=lambda kv: -kv[1]["seconds"]):
            lines.append(f"  {name:<31}{entry['seconds']:8.1f} s  {entry['outcome']}")
    measured = report.get("measurements", {})
    for key, label in (
        ("attach_to_bind_seconds", "attach-to-bind latency"),
        ("ready_to_bind_seconds", "ready-to-bind latency"),  # bindingModel node-local: nothing is attached
        ("detach_seconds", "release-to-detached"),
    ):
        if key in measured:
            m = measured[key]
            lines.append(f"{label:<28}median {m['median']:.2f} s, p95 {m['p95']:.2f} s (n={m['count']})")
    for key, label in (
        ("allocations_per_claim", "allocations per claim"),
        ("attaches_per_bound_pod", "attaches per bound pod"),
    ):
        if key in measured:  # the headline pod's path: keep-in-pool needs 1 allocation, reschedule-to-local 2
            m = measured[key]
            lines.append(f"{label:<28}median {m['median']:g}, max {m['max']:g} (n={m['count']})")
    lines += path_cost_lines(report.get("pathCost"))
    lines += scheduler_metrics_lines(report.get("schedulerMetrics"))
    with_ = measured.get("scale_pods_per_second_with_conditions")
    without = measured.get("scale_pods_per_second_without_conditions")
    if with_ and without:
        ratio = with_["median"] / without["median"] if without["median"] else 0.0
        lines.append(
            f"SCALE-1 pods bound per second: with conditions {with_['median']:.2f}, "
            f"without {without['median']:.2f}, ratio {ratio:.2f}"
        )
    if "scale_seconds_to_all_bound_with_conditions" in measured:
        lines.append(
            f"SCALE-1 seconds until all bound (with conditions) "
            f"{measured['scale_seconds_to_all_bound_with_conditions']['median']:.1f} s"
        )
    return lines


def path_cost_lines(cost: dict[str, Any] | None) -> list[str]:
    """COST-1..3: the fair single pod's path against its binding model's minimum (absent: the scenario did not end)."""
    if not cost:
        return []
    rounds, attaches = cost["schedulingRounds"], cost["attaches"]
    seconds = cost["allocationToBindingSeconds"]
    measured = "not probed" if attaches["measured"] is None else f"{attaches['measured']}"
    lines = [
        f"path cost ({cost['bindingModel']}, alone on node {cost['node']}):",
        f"  scheduling rounds         {rounds['measured']:>6} (minimum {rounds['minimum']})",
        f"  attaches                  {measured:>6} (minimum {attaches['minimum']}, "
        f"detaches on the way {attaches['detachesOnTheWay'] or 0})",
        f"  allocation to binding     {seconds['measured'] if seconds['measured'] is not None else '-':>6} s "
        f"(bound {seconds['bound']:g} s)",
    ]
    lines += [f"  detour: {d}" for d in cost.get("detours") or []]
    return lines


def _p(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("p50Seconds") is None:
        return "none"
    return f"p50 {entry['p50Seconds']:.2f} s, p99 {entry['p99Seconds']:.2f} s (n={entry['count']})"


def scheduler_metrics_lines(section: dict[str, Any] | None) -> list[str]:
    """SCH-10's figures: the KEP's SLI (PreBind wait, status=success, from kube-scheduler's histogram) beside the
    record's own latencies, and what the metrics counted against the record; absent: the run did not read them."""
    if not section:
        return []
    if "sli" not in section:
        return [f"PreBind wait SLI (kube-scheduler metrics): not read: {section.get('notJudged', 'not judged')}"]
    record = section.get("record") or {}
    counted: dict[str, int] = {}
    for row in section.get("rows") or []:
        counted[row["status"]] = counted.get(row["status"], 0) + row["counted"]
    return [
        f"PreBind wait SLI (metric, success)  {_p(section['sli'])} (n: observations, one per allocated device)",
        f"  record: reservation-to-bind       {_p(record.get('reservation_to_bind'))}",
        f"  record: condition-write-to-bind   {_p(record.get('conditions_to_bind'))}",
        f"  PreBind waits {section['waits']} ({section['judged']}); allocations_total in the window: "
        + (", ".join(f"{k} {v}" for k, v in counted.items()) or "none"),
    ]


def print_figures(path: Path) -> None:
    report = yaml.safe_load(path.read_text())
    for line in figures(report):
        print(line)
