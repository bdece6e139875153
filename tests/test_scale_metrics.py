"""`make scale`'s pure parts: histograms from a Prometheus exposition, one wave's share of them, quantiles from the
buckets as histogram_quantile computes them, and the components' figures named as the scheduler names them."""

from __future__ import annotations

import math

import pytest

from conformance.scale.components import apiserver_figures, scheduler_figures
from conformance.scale.metrics import Histogram, histogram, label_values, names, parse, summary

EXPOSITION = """
# HELP scheduler_scheduling_attempt_duration_seconds [STABLE] Scheduling attempt latency in seconds
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="0.001"} 0
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="0.01"} 50
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="0.1"} 90
scheduler_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="+Inf"} 100
scheduler_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="scheduled"} 2.5
scheduler_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 100
scheduler_dra_bindingconditions_wait_duration_seconds_bucket{driver="d",status="success",le="5"} 10
scheduler_dra_bindingconditions_wait_duration_seconds_bucket{driver="d",status="success",le="10"} 20
scheduler_dra_bindingconditions_wait_duration_seconds_bucket{driver="d",status="success",le="+Inf"} 20
scheduler_dra_bindingconditions_wait_duration_seconds_sum{driver="d",status="success"} 120
scheduler_dra_bindingconditions_wait_duration_seconds_count{driver="d",status="success"} 20
apiserver_request_duration_seconds_bucket{resource="resourceclaims",subresource="status",verb="PUT",le="0.005"} 3
apiserver_request_duration_seconds_bucket{resource="resourceclaims",subresource="status",verb="PUT",le="0.025"} 4
apiserver_request_duration_seconds_bucket{resource="resourceclaims",subresource="status",verb="PUT",le="+Inf"} 4
apiserver_request_duration_seconds_sum{resource="resourceclaims",subresource="status",verb="PUT"} 0.03
apiserver_request_duration_seconds_count{resource="resourceclaims",subresource="status",verb="PUT"} 4
apiserver_request_duration_seconds_bucket{resource="resourceclaims",subresource="",verb="PUT",le="+Inf"} 9
scheduler_scheduling_algorithm_duration_seconds_bucket{le="0.1"} 2
scheduler_scheduling_algorithm_duration_seconds_bucket{le="1"} 4
scheduler_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 4
scheduler_scheduling_algorithm_duration_seconds_sum 1.2
scheduler_scheduling_algorithm_duration_seconds_count 4
scheduler_framework_extension_point_duration_seconds_bucket{extension_point="Filter",status="Success",le="0.2048"} 3
scheduler_framework_extension_point_duration_seconds_bucket{extension_point="Filter",status="Success",le="+Inf"} 4
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Filter",status="Success"} 1.0
scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",status="Success"} 4
"""


def test_parse_keeps_labels_and_values() -> None:
    samples = parse(EXPOSITION)
    key = (("profile", "default-scheduler"), ("result", "scheduled"))
    assert samples["scheduler_scheduling_attempt_duration_seconds_count"][key] == 100
    assert names(samples, "bindingconditions") == ["scheduler_dra_bindingconditions_wait_duration_seconds"]
    assert label_values(samples, "scheduler_dra_bindingconditions_wait_duration_seconds_count", "status") == ["success"]


def test_quantile_interpolates_inside_the_bucket_like_histogram_quantile() -> None:
    h = histogram(parse(EXPOSITION), "scheduler_scheduling_attempt_duration_seconds")
    assert h.count == 100 and h.sum == 2.5
    # rank 50 is the top of the (0.001, 0.01] bucket; rank 70 is halfway through (0.01, 0.1]
    assert h.quantile(0.5) == pytest.approx(0.01)
    assert h.quantile(0.7) == pytest.approx(0.055)
    # rank 99 falls in the +Inf bucket: the highest finite bound, as Prometheus answers
    assert h.quantile(0.99) == pytest.approx(0.1)


def test_quantile_of_nothing_is_none() -> None:
    assert Histogram().quantile(0.5) is None
    assert Histogram({1.0: 0.0, math.inf: 0.0}).quantile(0.99) is None


def test_minus_gives_one_waves_share() -> None:
    before = Histogram({1.0: 10, 5.0: 10, math.inf: 10}, sum=5, count=10)
    after = Histogram({1.0: 10, 5.0: 30, math.inf: 30}, sum=65, count=30)
    wave = after.minus(before)
    assert wave.count == 20 and wave.sum == 60 and wave.mean == 3
    assert wave.quantile(0.5) == pytest.approx(3.0)  # all 20 in (1, 5]: rank 10 halfway


def test_summary_scales_to_milliseconds() -> None:
    h = histogram(parse(EXPOSITION), "scheduler_scheduling_attempt_duration_seconds")
    # p99 lies in the +Inf bucket: the histogram can only say it is above 100 ms
    assert summary(h, 1000.0) == {"count": 100, "p50": 10.0, "p99": ">100", "mean": 25.0}
    assert not h.overflows(0.9) and h.overflows(0.91)


def test_components_figures_use_the_names_the_scheduler_serves() -> None:
    after = parse(EXPOSITION)
    figures = scheduler_figures({}, after)
    assert figures["schedulingAttemptMs"]["scheduled"]["count"] == 100
    wait = figures["bindingConditions"]["scheduler_dra_bindingconditions_wait_duration_seconds"]["success"]
    assert wait == {"count": 20, "p50": 5.0, "p99": 9.9, "mean": 6.0}
    assert figures["algorithmMs"] == {"count": 4, "p50": 100.0, "p99": 982.0, "mean": 300.0}
    assert (
        figures["extensionPointMs"]["Filter"]["mean"] == 250.0
        and figures["extensionPointMs"]["Filter"]["p99"] == ">204.8"
    )
    assert scheduler_figures({}, {}) == {"unreadable": "kube-scheduler's /metrics could not be read"}
    # only the status subresource's writes: the 9 PUTs of the claims themselves are not counted
    assert apiserver_figures({}, after) == {"PUT": {"count": 4, "p50": 3.3333, "p99": 24.2, "mean": 7.5}}
