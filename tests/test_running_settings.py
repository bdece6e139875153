"""Reading the running components' settings (/metrics feature gauges, /configz) and the windows BASE-2 and SCH-6 judge
a measured binding timeout in. The metrics text is the exposition format kube-apiserver 1.37.2 serves (excerpt)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.cluster.providers.base import ClusterInfo
from conformance.cluster.running import (
    ComponentClient,
    ComponentReading,
    FeatureGauge,
    configz_binding_timeout,
    parse_duration,
    read_scheduler,
)
from conformance.cluster.running import parse_feature_gauges as parse
from conformance.cluster.settings import clear_window, declared_gates, event_window
from conformance.observe.views import Allocation
from conformance.suite.cluster.test_binding_timeout import Timeout
from conformance.suite.cluster.test_running_settings import gate_mismatches

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="200",verb="GET"} 12
# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRADeviceBindingConditions",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAResourceClaimDeviceStatus",stage=""} 1
kubernetes_feature_enabled{name="DRAResourcePoolStatus",stage="ALPHA"} 0
kubernetes_feature_enabled{stage="BETA"} 1
"""


def test_feature_gauges_are_read_with_stage_and_value() -> None:
    gates = parse(METRICS)
    assert gates == {
        "DRADeviceBindingConditions": FeatureGauge("DRADeviceBindingConditions", "BETA", True),
        "DRAResourceClaimDeviceStatus": FeatureGauge("DRAResourceClaimDeviceStatus", "", True),
        "DRAResourcePoolStatus": FeatureGauge("DRAResourcePoolStatus", "ALPHA", False),
    }


def test_metrics_without_the_gauge_give_nothing() -> None:
    assert parse('apiserver_request_total{code="200"} 1\n') == {}


def test_durations_as_configurations_serialize_them() -> None:
    assert parse_duration("20s") == 20
    assert parse_duration("1m30s") == 90
    assert parse_duration("1.5s") == 1.5
    with pytest.raises(ValueError):
        parse_duration("20")


def test_configz_binding_timeout_of_the_default_profile() -> None:
    configz = {
        "componentconfig": {
            "profiles": [
                {"schedulerName": "other", "pluginConfig": [{"name": "DynamicResources", "args": {}}]},
                {
                    "schedulerName": "default-scheduler",
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {}},
                        {"name": "DynamicResources", "args": {"bindingTimeout": "45s"}},
                    ],
                },
            ]
        }
    }
    assert configz_binding_timeout(configz) == 45
    assert configz_binding_timeout({"componentconfig": {"profiles": [{"schedulerName": "default-scheduler"}]}}) is None


def _info(gates: dict[str, bool]) -> ClusterInfo:
    return ClusterInfo("c", "local", None, "1.37.2", gates, 20, True, [])  # type: ignore[arg-type]


def test_declared_gates_are_the_relied_ones_then_the_passed_ones() -> None:
    declared = declared_gates(_info({"DRADeviceBindingConditions": False, "DRADeviceTaints": True}))
    assert declared["DRADeviceBindingConditions"] is False  # a run that turns it off declares it off
    assert declared["DRAResourceClaimDeviceStatus"] is True
    assert declared["DRADeviceTaints"] is True


def test_a_gate_off_in_one_component_is_named_with_the_component() -> None:
    reading = ComponentReading("kube-scheduler", "https://127.0.0.1:1/metrics", gates=parse(METRICS))
    reading.gates["DRADeviceBindingConditions"] = FeatureGauge("DRADeviceBindingConditions", "BETA", False)
    wrong = gate_mismatches(declared_gates(_info({})), reading)
    assert len(wrong) == 1
    assert wrong[0].startswith("kube-scheduler: DRADeviceBindingConditions declared on, runs off")
    # A gate the release no longer has (DynamicResourceAllocation is not in the excerpt) is not a mismatch.
    assert not gate_mismatches({"DynamicResourceAllocation": True}, reading)


def test_windows_around_a_declared_timeout() -> None:
    event = event_window(20)
    assert (event.low, event.high) == (20, 23)  # + 1 s truncation + 2 s slack
    clear = clear_window(20)
    assert (clear.low, clear.high) == (19, 32)  # - 1 s truncation; + 5 s poll + 1 s backoff + 1 s flush + 5 s slack
    assert clear.holds(21.1) and not clear.holds(35.2) and not clear.holds(18.0)
    assert "PreBind poll" in clear.describe()
    assert clear.miss(18.0).startswith("sooner than 19 s") and clear.miss(35.2).startswith("later than 32 s")


def _timeout(event_time: str | None, cleared_after: float | None) -> Timeout:
    allocation = Allocation(1, 1000.0, {"allocationTimestamp": "2026-12-05T03:50:01Z", "devices": {"results": []}})
    if cleared_after is not None:
        allocation.cleared_revision, allocation.cleared_at = 2, 1000.0 + cleared_after
    run = Timeout("node-0", 20.0, allocations=[allocation])
    if event_time:
        message = "running PreBind plugin: device binding timeout"
        run.events = [{"type": "Warning", "reason": "FailedScheduling", "message": message, "eventTime": event_time}]
    return run


def test_the_timeout_is_measured_from_the_event_when_there_is_one() -> None:
    seconds, window, how = _timeout("2026-12-05T03:50:21.883000Z", 21.1).measured()  # type: ignore[misc]
    assert seconds == pytest.approx(20.883) and window == event_window(20) and "eventTime" in how
    seconds, window, how = _timeout("2026-12-05T03:50:41.200000Z", 42.0).measured()  # type: ignore[misc]
    assert not window.holds(seconds)  # a scheduler running 40 s where 20 s is declared


def test_without_the_event_the_clearing_measures_it() -> None:
    seconds, window, how = _timeout(None, 21.1).measured()  # type: ignore[misc]
    assert seconds == pytest.approx(21.1) and window == clear_window(20) and "cleared" in how
    assert _timeout(None, None).measured() is None
    assert "unmeasured" in _timeout(None, None).as_report()


class _Runner:
    """Stands in for the ScenarioRunner: the observations of the scenarios that ended (a unit-test fake)."""

    def __init__(self, **results: object) -> None:
        self.results = {name.replace("_", "-"): r for name, r in results.items()}

    def finished(self, name: str) -> object | None:
        return self.results.get(name)


def test_the_report_puts_declared_beside_measured_and_says_what_was_not_read() -> None:
    from conformance.suite.cluster.test_running_settings import Running
    from conformance.suite.declared import settings_report, settings_summary

    info = _info({"DRADeviceBindingConditions": True})
    apiserver = ComponentReading("kube-apiserver", "/metrics through the API", gates=parse(METRICS))
    scheduler = ComponentReading("kube-scheduler", "(none)", error="no address")
    running = Running(declared_gates(info), [apiserver, scheduler])
    report = settings_report(info, _Runner(running_settings=running, binding_timeout=_timeout(None, 21.1)))  # type: ignore[arg-type]
    assert report["declared"] == {"featureGates": declared_gates(info), "bindingTimeoutSeconds": 20}
    measured = report["measured"]
    assert measured["kube-apiserver"]["featureGates"]["DRAResourcePoolStatus"] is False
    assert measured["kube-scheduler"] == {"source": "(none)", "unreadable": "no address"}
    assert measured["bindingTimeout"]["clearedAfterSeconds"] == 21.1
    assert "kube-scheduler unread: no address" in settings_summary(measured)
    nothing = settings_report(info, _Runner())["measured"]  # type: ignore[arg-type]
    assert "not measured" in nothing["bindingTimeout"] and "not measured" in nothing["featureGates"]


def _kubeconfig(tmp_path: Path, user: dict[str, str]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


def test_a_component_is_asked_with_the_kubeconfig_token_or_said_unreadable(tmp_path: Path) -> None:
    client = ComponentClient(_kubeconfig(tmp_path, {"token": "abc"}))
    assert client.headers == {"Authorization": "Bearer abc"}
    client.close()
    with pytest.raises(ValueError, match="neither a client certificate nor a token"):
        ComponentClient(_kubeconfig(tmp_path, {"exec": "gke-gcloud-auth-plugin"}))
    reading = read_scheduler("https://127.0.0.1:1", _kubeconfig(tmp_path, {}))
    assert reading.error.startswith("no credentials to present") and reading.as_report()["unreadable"]


def test_the_html_shows_declared_beside_each_component_and_marks_a_mismatch() -> None:
    from conformance.report.html import _settings

    report = {
        "cluster": {
            "settings": {
                "declared": {"featureGates": {"DRADeviceBindingConditions": True}, "bindingTimeoutSeconds": 20},
                "measured": {
                    "kube-apiserver": {"source": "/metrics", "featureGates": {"DRADeviceBindingConditions": True}},
                    "kube-scheduler": {"source": "x", "featureGates": {"DRADeviceBindingConditions": False}},
                    "bindingTimeout": {"declaredSeconds": 20, "timeoutEventAfterSeconds": 35.1},
                },
            }
        }
    }
    page = _settings(report)
    assert '<td class="passed">true</td><td class="failed">false</td>' in page
    assert "timeoutEventAfterSeconds 35.1" in page
    assert "not measured" in _settings({"cluster": {}})


class _Request:
    """Stands in for pytest's request: the binding-timeout observation, or the error of a scenario not run here."""

    def __init__(self, observed: object) -> None:
        self.observed = observed
        self.node = type("Node", (), {"user_properties": []})()

    def getfixturevalue(self, name: str) -> object:
        if isinstance(self.observed, Exception):
            raise self.observed
        return self.observed


def test_an_unread_scheduler_is_judged_by_its_waiting_or_skipped() -> None:
    from conformance.suite.cluster.test_running_settings import Running, test_components_run_the_declared_feature_gates

    unread = Running(
        declared_gates(_info({})),
        [ComponentReading("kube-scheduler", "(none)", error="no address of its port")],
    )
    waited = _timeout(None, 21.1)
    waited.events = [{"type": "Normal", "reason": "BindingConditionsPending", "message": "waiting", "eventTime": ""}]
    request = _Request(waited)
    test_components_run_the_declared_feature_gates(unread, "kube-scheduler", request)  # type: ignore[arg-type]
    assert request.node.user_properties == [("shown by behaviour", "BindingConditionsPending: waiting")]
    for nothing in (_timeout(None, 21.1), KeyError("binding-timeout")):
        with pytest.raises(pytest.skip.Exception, match="no BindingConditionsPending event"):
            test_components_run_the_declared_feature_gates(unread, "kube-scheduler", _Request(nothing))  # type: ignore[arg-type]
    unread.declared["DRADeviceTaints"] = True  # not shown by waiting: skipped as unreadable
    with pytest.raises(pytest.skip.Exception, match="cannot be read: no address"):
        test_components_run_the_declared_feature_gates(unread, "kube-scheduler", request)  # type: ignore[arg-type]
