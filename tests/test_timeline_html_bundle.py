"""Timelines, the HTML report, the bundle and `compare`, from a hand-made record (a stand-in for the recorder's
watches: Record objects built here, no cluster). The HTML page is also rendered in headless chromium when the
machine has it (`make chromium`); the screenshot is kept under reports/html-check/."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conformance.cli import main
from conformance.observe.recorder import Record
from conformance.report.browser import check_page, find_chromium
from conformance.report.bundle import MANIFEST, compare, make_bundle, verify
from conformance.report.html import render
from conformance.report.timeline import Window, build, phases, svg

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_000_000.0
NS = "attach-before-bind-abc"
DRIVER = "gpu.fabric.example.com"


def _claim(alloc: bool, status: str | None = None, deleted: bool = False) -> dict:
    obj: dict = {"metadata": {"name": "c", "namespace": NS}, "status": {}}
    if alloc:
        obj["status"]["allocation"] = {
            "allocationTimestamp": "t1",
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                ]
            },
            "devices": {
                "results": [
                    {
                        "driver": DRIVER,
                        "pool": "fabric-0",
                        "device": "gpu-3",
                        "bindingConditions": ["gpu.fabric.example.com/attached"],
                        "bindingFailureConditions": ["gpu.fabric.example.com/attach-failed"],
                    }
                ]
            },
        }
    if status:
        obj["status"]["devices"] = [
            {
                "driver": DRIVER,
                "pool": "fabric-0",
                "device": "gpu-3",
                "conditions": [{"type": "gpu.fabric.example.com/attached", "status": status, "reason": "Attached"}],
            }
        ]
    if deleted:
        obj["metadata"]["deletionTimestamp"] = "now"
    return obj


def _pod(node: str | None, phase: str = "Pending") -> dict:
    return {"metadata": {"name": "p", "namespace": NS}, "spec": {"nodeName": node}, "status": {"phase": phase}}


def records(bound_at: float = 4.0) -> list[Record]:
    rows = [
        (0.5, "claim", "ADDED", "c", 10, _claim(False)),
        (0.6, "pod", "ADDED", "p", 11, _pod(None)),
        (1.0, "claim", "MODIFIED", "c", 12, _claim(True)),
        (
            1.1,
            "event",
            "ADDED",
            "e1",
            13,
            {
                "reason": "BindingConditionsPending",
                "message": "waiting",
                "type": "Normal",
                "object": {"kind": "Pod", "namespace": NS, "name": "p"},
            },
        ),
        (
            1.2,
            "probe",
            "CHANGED",
            "uuid-3",
            None,
            {"device": "uuid-3", "node": "node-1", "state": "attaching", "previous": []},
        ),
        (
            2.2,
            "probe",
            "CHANGED",
            "uuid-3",
            None,
            {"device": "uuid-3", "node": "node-1", "state": "attached", "previous": ["node-1", "attaching"]},
        ),
        (2.5, "claim", "MODIFIED", "c", 14, _claim(True, "True")),
        (bound_at, "pod", "MODIFIED", "p", 15, _pod("node-1")),
        (5.0, "pod", "MODIFIED", "p", 16, _pod("node-1", "Running")),
        (8.0, "pod", "DELETED", "p", 17, _pod("node-1", "Running")),
        (8.2, "claim", "MODIFIED", "c", 18, _claim(True)),  # the conditions go first,
        (8.3, "claim", "MODIFIED", "c", 19, _claim(False)),  # then the allocation: a release after use
        (8.5, "claim", "DELETED", "c", 20, _claim(False, deleted=True)),
        (
            20.0,
            "probe",
            "CHANGED",
            "uuid-3",
            None,
            {"device": "uuid-3", "node": "node-1", "state": "free", "previous": ["node-1", "attached"]},
        ),
    ]
    return [
        Record(i, T0 + at, kind, typ, NS if kind != "probe" else "", name, rv, obj)
        for i, (at, kind, typ, name, rv, obj) in enumerate(rows)
    ]


def _window() -> Window:
    return Window("attach-before-bind", T0, T0 + 9.0, "passed", frozenset({NS}), frozenset({"uuid-3"}))


def test_the_timeline_holds_every_decisive_moment_relative_to_the_scenario_start() -> None:
    timeline = build(_window(), records(), {("fabric-0", "gpu-3"): "uuid-3"})
    seen = {(m["lane"], m["what"]): m for m in timeline["moments"]}
    assert seen[("claim attach-before-bind-abc/c", "allocated")]["detail"] == "fabric-0/gpu-3 on node-1"
    assert seen[("claim attach-before-bind-abc/c", "attached=True")]["t"] == 2.5
    assert seen[("claim attach-before-bind-abc/c", "conditions ready")]["decides"] == ["IMP-3", "SCH-4"]
    assert seen[("pod attach-before-bind-abc/p", "bound")]["t"] == 4.0
    assert seen[("pod attach-before-bind-abc/p", "event BindingConditionsPending")]["decides"] == ["SCH-3"]
    assert seen[("device uuid-3", "fabric attached")]["t"] == 2.2
    assert seen[("device uuid-3", "fabric free")]["t"] == 20.0  # the detach after the scenario's end is kept
    assert {lane["kind"] for lane in timeline["lanes"]} == {"claim", "pod", "device"}
    spans = {(s["lane"], s["state"]): (s["from"], s["to"]) for s in timeline["spans"]}
    assert spans[("device uuid-3", "attached node-1")] == (2.2, 20.0)
    assert seen[("claim attach-before-bind-abc/c", "deallocated")]["decides"] == []  # released after use
    assert ("device uuid-3", "held twice") not in seen
    assert [p for _, p in phases(timeline)][:3] == [
        "claims created: scheduling",
        "allocated: waiting in PreBind for the binding conditions",
        "bound",
    ]
    drawing = svg(timeline)
    assert drawing.startswith("<svg") and drawing.count("<path") >= 5 and "fabric attached" in drawing


def _reports(folder: Path, outcome: str = "passed", reason: str = "") -> Path:
    folder.mkdir(parents=True)
    timeline = build(_window(), records(), {("fabric-0", "gpu-3"): "uuid-3"})
    (folder / "timelines").mkdir()
    (folder / "timelines" / "attach-before-bind.json").write_text(json.dumps(timeline))
    (folder / "timelines" / "attach-before-bind.svg").write_text(svg(timeline))
    (folder / "artefacts").mkdir()
    (folder / "artefacts" / "events.yaml").write_text("[]\n")
    (folder / "artefacts" / "index.json").write_text(
        json.dumps(
            {
                "fileLimitBytes": 10,
                "totalLimitBytes": 100,
                "keptBytes": 3,
                "gatherSeconds": 0.1,
                "files": {"events.yaml": {"bytes": 3, "keptBytes": 3, "what": "events"}},
            }
        )
    )
    report = {
        "kind": "ConformanceReport",
        "result": "success" if outcome == "passed" else "failure",
        "implementation": {"profile": "reference"},
        "cluster": {"kubernetes": "1.37.2", "provider": "local"},
        "verdicts": {
            "cluster": {"result": "success", "reasons": []},
            "implementation": {
                "result": "success" if outcome == "passed" else "failure",
                "reasons": [reason] if reason else [],
            },
        },
        "scenarios": {
            "attach-before-bind": {"outcome": outcome, "seconds": 9.0},
            "reschedule-to-local": {"outcome": "skipped", "seconds": 0.0},  # skipped at once: no timeline
        },
        "measurements": {"attach_to_bind_seconds": {"median": 3.0, "p95": 3.0, "min": 3, "max": 3, "count": 1}},
        "requirements": {
            "IMP-2": {
                "level": "MUST",
                "title": "attach before bind",
                "outcome": outcome,
                "reason": reason,
                "evidence": ["timelines/attach-before-bind.svg", "timelines/attach-before-bind.json"],
            },
            "SCH-1": {"level": "MUST", "title": "node-local preferred", "outcome": "passed", "reason": ""},
        },
    }
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump(report))
    return folder


def test_the_html_report_is_one_self_contained_page(tmp_path: Path) -> None:
    page = render(_reports(tmp_path / "r", "failed", "AssertionError: pod bound on node-2, device attached to node-1"))
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "pod bound on node-2, device attached to node-1" in text and text.count("<svg") == 1
    assert 'href="timelines/attach-before-bind.svg"' in text and 'href="artefacts/events.yaml"' in text


def test_the_bundle_round_trips_through_report_and_compare_lists_regressions(tmp_path: Path) -> None:
    old = _reports(tmp_path / "old")
    new = _reports(tmp_path / "new", "failed", "AssertionError: pod bound before the attach")
    bundle = make_bundle(new, tmp_path / "new.tar.gz")
    with tarfile.open(bundle) as tar:
        assert MANIFEST in tar.getnames() and "timelines/attach-before-bind.json" in tar.getnames()
    assert verify(new) == []
    result = CliRunner().invoke(main, ["report", str(bundle), "--out", str(tmp_path / "unpacked")])
    assert result.exit_code == 0, result.output
    assert "pod bound before the attach" in (tmp_path / "unpacked" / "report.html").read_text()
    (new / "timelines" / "attach-before-bind.json").write_text("{}")  # tampered: the bundle no longer matches
    broken = make_bundle(new, tmp_path / "broken.tar.gz")
    with tarfile.open(broken, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(broken, "w:gz") as tar:
        for m, data in members:
            if m.name == "conformance-report.yaml":
                data = data.replace(b"1.37.2", b"1.37.3")
            import io

            tar.addfile(m, io.BytesIO(data))
    result = CliRunner().invoke(main, ["report", str(broken), "--out", str(tmp_path / "x")])
    assert result.exit_code != 0 and "checksum differs" in result.output
    changes = compare(
        yaml.safe_load((old / "conformance-report.yaml").read_text()),
        yaml.safe_load((new / "conformance-report.yaml").read_text()),
    )
    assert changes == [
        {
            "requirement": "IMP-2",
            "before": "passed",
            "after": "failed",
            "regression": "True",
            "reason": "AssertionError: pod bound before the attach",
        }
    ]
    result = CliRunner().invoke(main, ["compare", str(old), str(bundle)])
    assert result.exit_code == 1 and "REGRESSION IMP-2: passed -> failed" in result.output


@pytest.mark.skipif(find_chromium() is None, reason="no chromium on this machine: `make chromium` installs it")
def test_chromium_renders_the_report_and_every_link_resolves(tmp_path: Path) -> None:
    page = render(_reports(tmp_path / "r"))
    kept = ROOT / "reports" / "html-check"
    check = check_page(page, kept / "screenshot.png")
    assert check.problems == [], check.problems
    assert check.links >= 8 and check.svgs >= 1
    assert (kept / "screenshot.png").stat().st_size > 10_000
    shutil.copy(page, kept / "report.html")
    page.write_text(
        page.read_text().replace("</body>", '<a href="artefacts/gone.log">x</a><a href="#nowhere">y</a></body>')
    )
    problems = check_page(page, tmp_path / "s.png").problems
    assert any("artefacts/gone.log" in p for p in problems) and any("#nowhere" in p for p in problems), problems


def test_a_device_in_two_live_allocations_is_marked_held_twice() -> None:
    other = _claim(True)
    other["metadata"]["name"] = "c2"
    rows = records()
    rows.insert(7, Record(0, T0 + 3.0, "claim", "MODIFIED", NS, "c2", 30, other))  # while c still holds gpu-3
    rows = [dataclasses.replace(r, seq=i) for i, r in enumerate(rows)]
    timeline = build(_window(), rows, {("fabric-0", "gpu-3"): "uuid-3"})
    twice = [m for m in timeline["moments"] if m["what"] == "held twice"]
    assert [(m["t"], m["detail"], m["decides"]) for m in twice] == [(3.0, "by c2 and c", ["IMP-6"])]
