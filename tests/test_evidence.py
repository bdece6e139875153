"""Evidence of a run, with a stand-in record (a Recorder fed by hand, no cluster): a failing scenario's objects
are snapshot before its cleanup, a skip is not a failure, artefacts keep within their bound and say so."""

from __future__ import annotations

import gzip
import json
import os
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


def test_a_cut_snapshot_is_still_valid_yaml_and_says_what_it_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gather, "FILE_LIMIT", 4000)
    arts = gather.Artefacts(tmp_path / "artefacts")
    claims = [{"metadata": {"name": f"claim-{i:04d}"}, "status": {"note": "x" * 60}} for i in range(200)]
    doc = {"takenAt": "now", "resourceClaims": claims, "nodes": [{"name": "node-0"}]}
    arts.write_yaml("objects/end.yaml", doc)
    text = (tmp_path / "artefacts" / "objects" / "end.yaml").read_text()
    assert len(text.encode()) <= 4000
    kept = yaml.safe_load(text)
    assert kept["nodes"] == [{"name": "node-0"}] and kept["takenAt"] == "now", "small lists are kept whole"
    n = len(kept["resourceClaims"])
    assert 0 < n < 200 and kept["resourceClaims"] == claims[:n]
    assert text.startswith("# cut to the size bound of 4000 bytes") and f"resourceClaims: kept {n} of 200" in text
    arts.write_yaml("events.yaml", claims)  # a list document stays a list
    text = (tmp_path / "artefacts" / "events.yaml").read_text()
    events = yaml.safe_load(text)
    assert len(text.encode()) <= 4000 and 0 < len(events) < 200 and events == claims[: len(events)]
    assert f"entries: kept {len(events)} of 200" in text


def test_a_cut_record_is_still_a_valid_gzip_ending_with_the_count_of_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gather, "FILE_LIMIT", 20_000)
    monkeypatch.setattr(gather, "CHUNK_LINES", 50)
    arts = gather.Artefacts(tmp_path / "artefacts")
    lines = [json.dumps({"seq": i, "noise": os.urandom(40).hex()}) for i in range(2000)]  # hardly compressible
    arts.write_jsonl_gz("record.jsonl.gz", lines)
    raw = (tmp_path / "artefacts" / "record.jsonl.gz").read_bytes()
    assert len(raw) <= 20_000
    read = gzip.decompress(raw).decode().splitlines()  # a byte cut would raise here
    last = json.loads(read[-1])
    assert read[:-1] == lines[: len(read) - 1] and last["cut"] == 2000 - (len(read) - 1) > 0
    small = gather.Artefacts(tmp_path / "small")
    small.write_jsonl_gz("record.jsonl.gz", lines[:10])
    assert gzip.decompress((tmp_path / "small" / "record.jsonl.gz").read_bytes()).decode().splitlines() == lines[:10]
