"""`dra-conformance review` over two small synthetic result bundles (1.36.3 and 1.37.2): each KEP question answered
per release from the requirements' outcomes, the questions no run answers listed as such, one JUnit whose cases keep
their KEP section, the figures and the known upstream defects per release."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from conformance.cli import main
from conformance.report.bundle import make_bundle
from conformance.report.catalogue import CATALOGUE, SUITE_REQUIREMENTS
from conformance.report.kep_questions import QUESTIONS, unknown_requirements
from conformance.report.review import (
    ANSWERED,
    FAILED,
    NOT_ANSWERED,
    NOT_APPLICABLE,
    NOT_RUN,
    PARTLY,
    Review,
    load_runs,
)


def _bundle(tmp: Path, version: str, outcomes: dict[str, str], **extra: Any) -> Path:
    folder = tmp / version
    folder.mkdir()
    requirements = {}
    for req in SUITE_REQUIREMENTS:
        rid = req.id
        outcome = outcomes.get(rid, "passed")
        entry: dict[str, Any] = {"level": req.level, "area": req.area, "title": req.title, "outcome": outcome}
        entry["reason"] = "" if outcome == "passed" else f"{rid} {outcome} on {version}"
        if rid == "SCH-9" and outcome == "failed":
            entry["knownDefects"] = ["double-allocation-after-binding-timeout"]
        requirements[rid] = entry
    report = {
        "kind": "ConformanceReport",
        "result": "failure" if "failed" in outcomes.values() else "success",
        "cluster": {"provider": "local", "kubernetes": version},
        "implementation": {"profile": "none"},
        "requirements": requirements,
        **extra,
    }
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump(report))
    return make_bundle(folder)


def _lifecycle(tmp: Path, version: str, outcomes: dict[str, str], kind: str = "gates") -> Path:
    """A lifecycle run's bundle: only its own requirements, and its findings."""
    folder = tmp / f"{kind}-{version}"
    folder.mkdir()
    requirements = {
        rid: {**{k: getattr(CATALOGUE[rid], k) for k in ("level", "area", "title")}, "outcome": o, "reason": ""}
        for rid, o in outcomes.items()
    }
    finding = {"question": "PRR-6", "kep": "will proceed to binding", "measured": "new pod: unschedulable"}
    report = {
        "kind": "ConformanceReport",
        "cluster": {"provider": "local", "kubernetes": version},
        "implementation": {"profile": f"none (lifecycle {kind})"},
        "lifecycle": {"kind": kind, "findings": [{**finding, "agrees": False}] if kind == "gates" else []},
        "requirements": requirements,
    }
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump(report))
    return make_bundle(folder)


def _bundles(tmp: Path) -> list[Path]:
    sli = {
        "sli": {"count": 7, "p50Seconds": 4.1, "p99Seconds": 6.3},
        "record": {"conditions_to_bind": {"count": 7, "p50Seconds": 2.2, "p99Seconds": 5.0}},
    }
    old = _bundle(tmp, "1.36.3", {"SCH-10": "skipped"}, schedulerMetrics={"notJudged": "kube-scheduler restarted"})
    new = _bundle(
        tmp,
        "1.37.2",
        {"SCH-9": "failed"},
        schedulerMetrics=sli,
        knownDefects=[{"id": "double-allocation-after-binding-timeout"}],
        measurements={"conditions_to_bind_seconds": {"median": 2.1, "p95": 4.9, "count": 3}},
    )
    return [old, new]


def test_the_questions_table_names_only_catalogue_requirements_and_every_open_question_says_why() -> None:
    assert unknown_requirements() == []
    ways = [(bool(q.answers), bool(q.open), q.scale) for q in QUESTIONS]
    assert all(sum(w) == 1 for w in ways), "a question is answered by requirements, by make scale, or open"


def test_each_question_is_answered_per_release_from_the_merged_outcomes(tmp_path: Path) -> None:
    review = Review(load_runs(_bundles(tmp_path)), {"1.38.0-beta.0": "no binaries in the cache"})
    assert review.releases == ["1.36.3", "1.37.2", "1.38.0-beta.0"]
    answers = {row[0].question.id: {a.release: a for a in row} for row in review.answers()}
    assert answers["TP-2"]["1.37.2"].status == FAILED  # SCH-9 failed there
    assert (
        answers["TP-2"]["1.37.2"].cells["SCH-9"].shown
        == "failed (known upstream defect: double-allocation-after-binding-timeout)"
    )
    assert answers["TP-2"]["1.36.3"].status == ANSWERED
    assert answers["GA-4"]["1.36.3"].status == NOT_ANSWERED  # SCH-10 skipped: not shown
    assert answers["GA-4"]["1.36.3"].why == "SCH-10 skipped: SCH-10 skipped on 1.36.3"  # the skip's own reason
    assert answers["TP-5"]["1.36.3"].status == PARTLY  # SCALE-1 passed, SCH-10 skipped
    assert answers["PRR-2"]["1.37.2"].status == NOT_ANSWERED  # no lifecycle run of 1.37.2 here
    assert "GATE-1 not-covered" in answers["PRR-2"]["1.37.2"].why
    assert "no `make scale` figures of 1.37.2" in answers["GA-3"]["1.37.2"].why  # GA-3: make scale, not a run
    assert answers["TP-1"]["1.38.0-beta.0"].status == NOT_RUN
    assert any("PreBind wait SLI (success) p50 4.1 s" in f for f in review.figures("1.37.2"))
    assert any("SCH-4 condition write to bind median 2.1" in f for f in review.figures("1.37.2"))
    assert review.defects("1.37.2")[0].startswith("double-allocation-after-binding-timeout (SCH-9): shown by a run")
    # 1.36.3 lists only what its sources show (a force delete's claim released before the node unprepared it, NODE-4
    # observes it and fails nothing), not the double allocation
    assert [d.split(" ")[0] for d in review.defects("1.36.3")] == [
        "force-delete-frees-device-before-unprepare",
        "scheduler-panic-in-resourceslice-tracker",  # the same tracker code in 1.35-1.38 (listed, not shown here)
    ]


def test_the_command_writes_one_page_and_one_junit_with_the_kep_sections(tmp_path: Path) -> None:
    out = tmp_path / "review"
    result = CliRunner().invoke(main, ["review", *map(str, _bundles(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "review of 2 runs on 1.36.3, 1.37.2" in result.output
    page = (out / "review.html").read_text()
    assert "Not answered by any run yet" in page and "5000+ nodes" in page
    markdown = (out / "review.md").read_text()
    assert "| **TP-2** (Test Plan / e2e tests)" in markdown and "❌ failed" in markdown
    suites = ET.parse(out / "review-junit.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "KEP-5007 review: Kubernetes 1.36.3",
        "KEP-5007 review: Kubernetes 1.37.2",
    ]
    cases = {c.get("name").split()[0]: c for c in suites[1].iter("testcase")}
    assert len(cases) == len(QUESTIONS)
    props = {p.get("name"): p.get("value") for p in cases["PRR-7"].iter("property")}
    assert props["kep_section"] == "PRR / Monitoring Requirements" and props["requirements"] == "SCH-10=passed"
    assert cases["TP-2"].find("failure") is not None and cases["PRR-5"].find("skipped") is not None
    assert suites[1].get("failures") == str(sum(c.find("failure") is not None for c in cases.values()))
    assert yaml.safe_load((out / "review.yaml").read_text())["kind"] == "EnhancementReview"


def test_a_bundle_that_does_not_match_its_manifest_is_refused(tmp_path: Path) -> None:
    bundle = _bundles(tmp_path)[0]
    bundle.write_bytes(b"not a tar")
    result = CliRunner().invoke(main, ["review", str(bundle), "--out", str(tmp_path / "r")])
    assert result.exit_code != 0 and "neither a reports folder nor a tar.gz bundle" in result.output


def test_make_review_runs_only_the_releases_whose_binaries_are_cached_and_names_the_others(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import conformance.matrix
    from conformance.cli import review as review_cli
    from conformance.report.matrix import ReleaseRun

    (tmp_path / "made").mkdir()
    bundles = {b.parent.name: b for b in _bundles(tmp_path / "made")}
    ran: list[str] = []

    def run_release(version: Any, out: Path, profile: str, args: tuple[str, ...], say: Any) -> ReleaseRun:
        ran.append(f"{version} {profile} {' '.join(args)}")
        return ReleaseRun(str(version), {"result": "success"}, reports_dir=str(bundles[str(version)].parent))

    monkeypatch.setattr(review_cli, "_cached", lambda version: str(version) == "1.37.2")
    monkeypatch.setattr(conformance.matrix, "run_release", run_release)
    out = tmp_path / "review"
    argv = ["review", "--run", "--release", "1.36.3", "--release", "1.37.2", "--profile", "none", "--out", str(out)]
    argv += ["--no-lifecycle"]  # the lifecycle runs: the next test
    result = CliRunner().invoke(main, [*argv, "--accept", "partial", "--pytest-args", '-k "gate or metrics"'])
    assert result.exit_code == 0, result.output
    assert ran == ["1.37.2 none --accept=partial -k gate or metrics"]
    assert "1.36.3: no binaries of 1.36.3 in the cache: not run" in result.output
    assert "**not run**: no binaries of 1.36.3 in the cache" in (out / "review.md").read_text()


def test_lifecycle_runs_answer_the_prr_questions_and_their_findings_are_shown(tmp_path: Path) -> None:
    lifecycle = [
        _lifecycle(tmp_path, "1.37.2", {"GATE-1": "passed", "GATE-2": "passed", "GATE-3": "failed"}),
        _lifecycle(
            tmp_path, "1.37.2", {"UPG-1": "passed", "UPG-2": "passed", "UPG-3": "passed", "SKEW-1": "passed"}, "upgrade"
        ),
    ]
    review = Review(load_runs([*_bundles(tmp_path), *lifecycle]), notes=["gates on 1.38.0-beta.0: locked on"])
    answers = {row[0].question.id: {a.release: a for a in row} for row in review.answers()}
    assert answers["PRR-2"]["1.37.2"].status == ANSWERED
    assert answers["PRR-3"]["1.37.2"].status == FAILED
    assert answers["PRR-5"]["1.37.2"].status == ANSWERED and answers["PRR-5"]["1.36.3"].status == NOT_ANSWERED
    assert answers["PRR-6"]["1.37.2"].differs[0]["measured"] == "new pod: unschedulable"
    out = tmp_path / "review"
    from conformance.report.review_write import write_review

    paths = write_review(review, out)
    markdown = paths["markdown"].read_text()
    assert 'PRR-6 DIFFERS: KEP: "will proceed to binding" Measured: new pod: unschedulable' in markdown
    assert "lifecycle run not run: gates on 1.38.0-beta.0: locked on" in markdown
    cases = {
        c.get("name").split()[0]: c for c in ET.parse(paths["junit"]).getroot().findall("testsuite")[1].iter("testcase")
    }
    props = {p.get("name"): p.get("value") for p in cases["PRR-6"].iter("property")}
    assert props["kep_text_differs"] == "new pod: unschedulable"


def test_make_review_runs_gates_per_release_and_upgrade_per_adjacent_pair(tmp_path: Path, monkeypatch: Any) -> None:
    import conformance.lifecycle.run as lifecycle_run
    from conformance.cli import review as review_cli
    from conformance.cluster.versions import parse_version
    from conformance.lifecycle.run import Outcome

    ran: list[str] = []

    def fake(name: str) -> Any:
        def run(*versions: Any) -> Outcome:
            ran.append(f"{name} {' '.join(str(v) for v in versions[:-1])}")
            return Outcome(versions[-1], versions[-1] / "results.tar.gz", "success", {})

        return run

    monkeypatch.setattr(review_cli, "_cached", lambda version: str(version) != "1.35.4")
    monkeypatch.setattr(lifecycle_run, "run_gates", fake("gates"))
    monkeypatch.setattr(lifecycle_run, "run_upgrade", fake("upgrade"))
    versions = [parse_version(v) for v in ("1.38.0-beta.0", "1.35.4", "1.36.3", "1.37.2")]
    bundles, notes = review_cli._run_lifecycle(versions, tmp_path)
    # 1.38's gate is locked on: its gates run starts nothing and writes GATE-1..3 not applicable (PRR-2/3 then read
    # "not applicable" there, with the reason), so it runs even without binaries
    assert ran == [
        "gates 1.36.3",
        "gates 1.37.2",
        "gates 1.38.0-beta.0",
        "upgrade 1.36.3 1.37.2",
        "upgrade 1.37.2 1.38.0-beta.0",
    ]
    assert len(bundles) == 5
    assert not any(n.startswith("gates on 1.38.0-beta.0") for n in notes)
    assert "gates on 1.35.4: no binaries of 1.35.4 in the cache" in notes
    assert "upgrade 1.35.4 <-> 1.36.3 (and its skew): no binaries of both in the cache" in notes


def test_review_yaml_names_its_sources_without_this_machines_folders(tmp_path: Path) -> None:
    # The docs site commits a copy of review.yaml (docs/review-measured.yaml): bundles of the review's own runs are
    # named from its folder, others by their folder and file name, the default scale curve from the repository.
    out = tmp_path / "review"
    (out / "runs").mkdir(parents=True)
    (tmp_path / "shard").mkdir()
    inside = _bundles(out / "runs")
    elsewhere = _bundles(tmp_path / "shard")
    result = CliRunner().invoke(main, ["review", *map(str, [*inside, *elsewhere]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load((out / "review.yaml").read_text())
    sources = [r["source"] for r in doc["runs"]]
    assert sources == [
        *(str(b.relative_to(out)) for b in inside),
        *(f"{b.parent.name}/{b.name}" for b in elsewhere),
    ]
    assert doc["scaleFigures"] == ["docs/figures/scale.json"]
    assert str(tmp_path) not in (out / "review.yaml").read_text() + (out / "review.md").read_text()


def test_the_docs_page_lists_every_question_and_renders_the_measured_review(tmp_path: Path) -> None:
    from conformance.docs import review_page

    missing = review_page.render(tmp_path / "none.yaml")
    assert all(f"| **{q.id}** |" in missing for q in QUESTIONS)
    assert "[GATE-1](reference/requirements.md#gate-1) (lifecycle)" in missing and "No measured review yet" in missing
    review = Review(load_runs([*_bundles(tmp_path), _lifecycle(tmp_path, "1.37.2", {"GATE-1": "passed"})]))
    measured = tmp_path / "measured.yaml"
    measured.write_text(yaml.safe_dump(review.document(), allow_unicode=True))
    page = review_page.render(measured)
    assert "## Last measured on this project's machine" in page and "### Questions and their answers" in page
    assert 'PRR-6 DIFFERS: KEP: "will proceed to binding"' in page


def test_a_question_whose_requirements_are_all_not_applicable_says_so_with_the_reason(tmp_path: Path) -> None:
    locked = "Kubernetes 1.38.0-beta.0: DRADeviceBindingConditions is GA and locked on"
    gates = _lifecycle(tmp_path, "1.38.0-beta.0", dict.fromkeys(("GATE-1", "GATE-2", "GATE-3"), "not-applicable"))
    folder = gates.parent
    report = yaml.safe_load((folder / "conformance-report.yaml").read_text())
    for entry in report["requirements"].values():
        entry["reason"] = locked
    (folder / "conformance-report.yaml").write_text(yaml.safe_dump(report))
    review = Review(load_runs([make_bundle(folder)]))
    answers = {row[0].question.id: {a.release: a for a in row} for row in review.answers()}
    prr2 = answers["PRR-2"]["1.38.0-beta.0"]
    assert prr2.status == NOT_APPLICABLE and prr2.why == f"GATE-1, GATE-2: {locked}"
    from conformance.report.review_write import write_review

    paths = write_review(review, tmp_path / "review")
    assert "⊘ not applicable" in paths["markdown"].read_text()
    [case] = [c for c in ET.parse(paths["junit"]).getroot().iter("testcase") if c.get("name", "").startswith("PRR-2")]
    assert case.find("skipped").get("message") == f"not applicable: GATE-1, GATE-2: {locked}"
