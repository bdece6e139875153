"""Evidence of a run, with a stand-in record (a Recorder fed by hand, no cluster): a failing scenario's objects
are snapshot before its cleanup, a skip is not a failure, artefacts keep within their bound and say so."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from conformance.observe.recorder import Recorder
from conformance.report import gather
from conformance.report.evidence import Evidence
from conformance.suite.scenario import Scenario


@dataclass
class _Ctx:
    scenario: Scenario
    namespaces: set[str] = field(default_factory=set)


def _evidence(tmp_path: Path) -> Evidence:
    rec = Recorder(cluster=None, run_id="r", attribute="uuid")  # type: ignore[arg-type]  # fed by hand below
    rec._on("claim")("ADDED", {"metadata": {"name": "mine", "namespace": "ns-a", "resourceVersion": "3"}})
    rec._on("claim")("ADDED", {"metadata": {"name": "other", "namespace": "ns-b", "resourceVersion": "4"}})
    return Evidence(tmp_path, recorder=rec, driver="d")


def test_a_failing_scenario_is_snapshot_before_its_cleanup_and_a_skip_is_not(tmp_path: Path) -> None:
    evidence = _evidence(tmp_path)

    def run(ctx: _Ctx) -> None:
        ctx.namespaces.add("ns-a")
        raise AssertionError("timed out waiting for the pod to be bound")

    sc = evidence.guard(Scenario("flow", "d", ("IMP-2",), run, "m"))
    with pytest.raises(AssertionError):
        sc.run(_Ctx(sc))
    snap = yaml.safe_load((tmp_path / evidence.failures["flow"]).read_text())
    assert [c["metadata"]["name"] for c in snap["resourceClaims"]] == ["mine"]

    def skipped(ctx: _Ctx) -> None:
        pytest.skip("no fault injector")

    other = evidence.guard(Scenario("other", "d", ("IMP-4",), skipped, "m"))
    with pytest.raises(pytest.skip.Exception):
        other.run(_Ctx(other))
    assert "other" not in evidence.failures


def test_artefacts_keep_within_their_bound_and_say_what_was_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gather, "FILE_LIMIT", 1000)
    monkeypatch.setattr(gather, "TOTAL_LIMIT", 1500)
    monkeypatch.setattr(gather, "HEAD", 200)
    arts = gather.Artefacts(tmp_path / "artefacts")
    arts.write("big.log", "a" * 5000 + "THE END")
    kept = (tmp_path / "artefacts" / "big.log").read_text()
    assert kept.startswith("a" * 200) and kept.endswith("THE END") and "bytes cut by the size bound" in kept
    assert arts.write("second.log", "b" * 5000) is not None  # what is left of the total
    assert arts.write("third.log", "c") is None
    arts.write_index()
    index = json.loads((tmp_path / "artefacts" / "index.json").read_text())
    assert index["files"]["third.log"]["omitted"] == "total bound reached"
    assert index["keptBytes"] <= 1500 and index["totalLimitBytes"] == 1500
