"""The cluster's declared settings beside what was measured of them, for conformance-report.yaml and the HTML page:
declared, the gates the cluster declares and its binding timeout; measured, each component's gates as it reports
them (scenario running-settings) and the timeout as the scheduler ran it (scenario binding-timeout). What was not
read says why, never a value assumed."""

from __future__ import annotations

from typing import Any

from conformance.cluster.providers.base import ClusterInfo
from conformance.cluster.settings import declared_gates
from conformance.suite.runner import ScenarioRunner

NOT_RUN = "not measured: scenario {name} was not run in this selection or ended in an error (see its requirement)"


def settings_report(info: ClusterInfo, runner: ScenarioRunner) -> dict[str, Any]:
    declared = {"featureGates": declared_gates(info), "bindingTimeoutSeconds": info.binding_timeout_s}
    measured: dict[str, Any] = {}
    running = runner.finished("running-settings")
    if running is None:
        measured["featureGates"] = NOT_RUN.format(name="running-settings")
    else:
        measured |= {r.component: r.as_report() for r in running.readings}
    timeout = runner.finished("binding-timeout")
    measured["bindingTimeout"] = timeout.as_report() if timeout else NOT_RUN.format(name="binding-timeout")
    return {"declared": declared, "measured": measured}


def settings_summary(measured: dict[str, Any]) -> str:
    """One line for the terminal: the timeout as measured, and which components' gates were read."""
    timeout = measured.get("bindingTimeout")
    if isinstance(timeout, dict):
        parts = [f"{k} {v}" for k, v in timeout.items() if k != "declaredSeconds"]
        line = "binding timeout: " + ", ".join(parts)
    else:
        line = f"binding timeout {timeout}"
    gates = [
        f"{c} {'unread: ' + v['unreadable'] if 'unreadable' in v else 'read from ' + v['source']}"
        for c, v in measured.items()
        if isinstance(v, dict) and c != "bindingTimeout"
    ]
    return "; ".join([line, *gates]) if gates else f"{line}; gates {measured.get('featureGates', 'not read')}"
