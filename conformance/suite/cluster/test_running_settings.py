"""BASE-2 (gates): the running kube-apiserver and kube-scheduler run the feature gates the cluster declares.

What a cluster declares: the gates the suite passed (local, kind), or, on an existing cluster where it passed none,
the gates every scenario relies on (conformance.cluster.settings.RELIED_GATES) on. What it runs: the gauge
`kubernetes_feature_enabled` each component serves on /metrics (conformance/cluster/running.py). A component whose
gates cannot be read (a managed cluster's scheduler) is judged by what it did where its sources make that proof:
kube-scheduler's PreBind waits on binding conditions, with its BindingConditionsPending event, only when both
DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on (dynamicresources.go PreBind), and allocates
only with DynamicResourceAllocation on; the binding-timeout scenario of the same run shows it. What neither can show
is skipped with the reason. A gate a component does not report is one its release no longer has (GA, removed: on).
The binding timeout half of BASE-2 is judged where it is measured: test_binding_timeout.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from conformance.cluster.running import ComponentReading, read_apiserver, read_scheduler
from conformance.cluster.settings import declared_gates
from conformance.suite.scenario import ClusterContext, ScenarioFailed, result_fixture, scenario

# kube-scheduler gates its PreBind wait (and the BindingConditionsPending event before it) on these two, and allocates
# devices only with DynamicResourceAllocation: a scheduler seen waiting runs all three.
SHOWN_BY_WAITING = ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus", "DRADeviceBindingConditions")
WAITING_EVENT = "BindingConditionsPending"


@dataclass
class Running:
    declared: dict[str, bool]
    readings: list[ComponentReading] = field(default_factory=list)


@scenario(
    "running-settings",
    "the feature gates kube-apiserver and kube-scheduler report on /metrics, beside the ones the cluster declares",
    ("BASE-2",),
    implementation=False,
)
def running_settings(ctx: ClusterContext) -> Running:
    info = ctx.cluster.info
    running = Running(declared_gates(info))
    running.readings.append(read_apiserver(ctx.cluster))
    if info.scheduler_endpoint:
        running.readings.append(read_scheduler(info.scheduler_endpoint, info.kubeconfig))
    else:
        running.readings.append(
            ComponentReading(
                "kube-scheduler",
                "(none)",
                error=f"the {info.provider} provider gives no address of kube-scheduler's secure port (on an existing "
                "cluster: --scheduler-url): its gates cannot be read from here (BASE-2 looks at what it did instead)",
            )
        )
    return running


running = result_fixture("running", "running-settings")
timeout_run = result_fixture("timeout_run", "binding-timeout")


def shown_by_behaviour(request: pytest.FixtureRequest) -> str | None:
    """The scheduler's own event, in this run's binding-timeout scenario, that shows it waiting on binding conditions;
    None where that scenario was not run here or saw no such event."""
    try:
        observed = request.getfixturevalue("timeout_run")
    except Exception:  # the scenario's module was not collected in this run (KeyError): nothing to show
        return None
    if isinstance(observed, ScenarioFailed):
        return None
    waited = [e for e in getattr(observed, "events", []) if e["reason"] == WAITING_EVENT]
    return f"{WAITING_EVENT}: {waited[0]['message']}" if waited else None


def gate_mismatches(declared: dict[str, bool], reading: ComponentReading) -> list[str]:
    """`component: Gate declared on, runs off (stage BETA)` for each declared gate the component runs otherwise."""
    wrong = []
    for name, want in sorted(declared.items()):
        gauge = reading.gates.get(name)
        if gauge is not None and gauge.enabled != want:
            stage = gauge.stage or "GA"
            wrong.append(
                f"{reading.component}: {name} declared {_on(want)}, runs {_on(gauge.enabled)} "
                f"(kubernetes_feature_enabled{{name={name!r},stage={stage!r}}} = {int(gauge.enabled)} on "
                f"{reading.source})"
            )
    return wrong


def _on(value: bool) -> str:
    return "on" if value else "off"


@pytest.mark.requirement("BASE-2")
@pytest.mark.parametrize("component", ["kube-apiserver", "kube-scheduler"])
def test_components_run_the_declared_feature_gates(
    running: Running, component: str, request: pytest.FixtureRequest
) -> None:
    reading = next(r for r in running.readings if r.component == component)
    declared_on = all(running.declared.values()) and set(running.declared) <= set(SHOWN_BY_WAITING)
    if reading.error and component == "kube-scheduler" and declared_on:
        if evidence := shown_by_behaviour(request):
            # Its gates, unread, are shown on by what it did (module docstring); the report names the event.
            request.node.user_properties.append(("shown by behaviour", evidence))
            return
        pytest.skip(
            f"{component}'s feature gates cannot be read ({reading.error}), and no BindingConditionsPending event of "
            "this run's binding-timeout scenario shows them on"
        )
    if reading.error:
        pytest.skip(f"{component}'s feature gates cannot be read: {reading.error}")
    wrong = gate_mismatches(running.declared, reading)
    absent = sorted(set(running.declared) - set(reading.gates))
    assert not wrong, "; ".join(wrong) + (f" (not reported, removed from the release: {absent})" if absent else "")
