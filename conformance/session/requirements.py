"""The requirement reporter: collects each test's outcome into its requirement's, decides the verdicts and the exit
status, and writes every report at the session's end (the plugin registers one per run)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import allure
import pytest

from conformance.cluster import interrupts
from conformance.cluster.defects import OBSERVED_PROPERTY, PROPERTY, accepted, catalogue
from conformance.implementation.profile import LoadedProfile
from conformance.report.bundle import make_bundle
from conformance.report.catalogue import CATALOGUE
from conformance.report.evidence import Evidence
from conformance.report.gather import FILE_LIMIT, TOTAL_LIMIT
from conformance.report.headline import conclude
from conformance.report.html import render as render_html
from conformance.report.outcomes import (
    NOT_APPLICABLE_PREFIX,
    NOTE_PROPERTY,
    PHASE_PROPERTY,
    Outcomes,
    RunResult,
    skip_outcome,
    write_certification_junit,
    write_conformance_report,
)
from conformance.report.reasons import headline, report_reason
from conformance.report.verdict import (
    IMPLEMENTATION_AREAS,
    NOT_APPLICABLE,
    NOT_JUDGED,
    KnownFailures,
    Verdict,
    known_defects,
)
from conformance.session.interrupts import swallowed_interrupt
from conformance.session.metrics import METRICS_KEY
from conformance.session.shared import (
    CLUSTER_KEY,
    CLUSTER_RUNNER_KEY,
    CLUSTER_TESTS_DONE_KEY,
    EVIDENCE_KEY,
    FOREIGN_FREE_KEY,
    MARKS_KEY,
    NO_PROFILE,
    NO_PROFILE_REASON,
    PROFILE_KEY,
    RUNNER_KEY,
    SELECTED_KEY,
    mark,
)
from conformance.session.terminal import TerminalSummary
from conformance.suite.declared import settings_report
from conformance.suite.implementation.restart_cells import matrix_report
from conformance.suite.phases import CLUSTER_SUITE, FIXTURES, PHASES, judged_in
from conformance.suite.scenario import REGISTRY, summarize

REPOSITORY = Path(__file__).resolve().parents[2]  # known defects name their write-ups by repository path
WRITEUPS = "known-defects"  # the reports folder's copies of them


class RequirementReporter(TerminalSummary):
    """Collects per-requirement outcomes during the run and writes the reports at its end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.started_at = time.time()
        self.requirement_of: dict[str, str] = {}
        self.outcomes = Outcomes()
        self.reasons: dict[tuple[str, str], str] = {}  # (nodeid, phase) -> the exception's message and evidence
        self.interrupted: set[str] = set()  # tests whose phase failed only because the interrupt landed in it
        self.module_of: dict[str, str] = {}
        self.summary: dict[str, dict[str, Any]] = {}
        self.packaging = ""
        self.verdicts: dict[str, Verdict] = {}
        self.result: str | None = None
        self.exit_status = 0  # the run's, once decided at the session's end
        self.headline = ""  # both verdicts and the exit status in one line (report/headline.py)
        self.other_failures: set[str] = set()  # failed test phases that name no known upstream defect
        self.known_failures: KnownFailures | None = None
        self.accepted = accepted(config.getoption("--accept"))
        config.stash[CLUSTER_TESTS_DONE_KEY] = threading.Event()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Map each test to its requirement id; an id not in the catalogue is an error, not a silent extra."""
        for item in items:
            marker = item.get_closest_marker("requirement")
            if marker is None:
                continue
            if not marker.args or marker.args[0] not in CATALOGUE:
                raise pytest.UsageError(
                    f"{item.nodeid}: requirement {marker.args!r} is not in the catalogue "
                    "(conformance/report/catalogue/)"
                )
            self.requirement_of[item.nodeid] = marker.args[0]
            self.module_of[item.nodeid] = getattr(getattr(item, "module", None), "__name__", "")
            req = CATALOGUE[marker.args[0]]
            if why := req.not_applicable(self.model):  # not run (no fixture either): reported not-applicable
                item.add_marker(pytest.mark.skip(reason=NOT_APPLICABLE_PREFIX + why))
                for label in (allure.epic("KEP-5007"), allure.feature(req.area), allure.story(req.id)):
                    item.add_marker(label)
                item.add_marker(allure.tag(NOT_APPLICABLE))
                item.user_properties += [("requirement", req.id), ("level", req.level), ("outcome", NOT_APPLICABLE)]
        # Run-wide judgements last: by then every selected scenario has started, and they wait for all to end. The plain
        # cluster tests (API-*: claims of suite-owned drivers allocated by hand) first: the foreign-free phase waits
        # for pytest's thread to be past them (suite/phases.py), while that thread waits for implementation results.
        items.sort(key=lambda item: (item.get_closest_marker("run_wide") is not None, not _plain_cluster(item)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Which scenarios start: those a test left after -k/-m deselection reads (its result fixture, by the module
        that defines it: several modules name theirs `run`), and, in a module of such a test, those no fixture hands
        over. A scenario all of whose requirements do not apply to the profile's binding model is not started."""
        items = [item for item in session.items if isinstance(item, pytest.Function)]
        modules = {item.module.__name__ for item in items}
        used = {n for item in items for f in item.fixturenames for n in FIXTURES.get((item.module.__name__, f), ())}
        handed = {n for names in FIXTURES.values() for n in names}
        self.config.stash[SELECTED_KEY] = [
            sc
            for sc in REGISTRY.values()
            if sc.module in modules
            and (sc.name in used or sc.name not in handed)
            and not all(CATALOGUE[r].not_applicable(self.model) for r in sc.requirements)
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """pytest's thread is past the plain cluster tests once it sets up any other test (they are sorted first)."""
        if not _plain_cluster(item):
            self.config.stash[CLUSTER_TESTS_DONE_KEY].set()

    @property
    def model(self) -> str | None:
        """The profile's binding model (None: a run without a profile)."""
        loaded = self.config.stash.get(PROFILE_KEY, None)
        return loaded.profile.binding_model if loaded is not None else None

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, Any] | None:
        """A test of a requirement that does not apply to the binding model, or whose scenario failed before its
        evidence existed: its own outcome in pytest's terminal (`12 not applicable`, `2 not judged`), apart from the
        skipped ones."""
        shown = dict(report.user_properties).get("outcome") if report.skipped else None
        if shown == NOT_APPLICABLE:
            return "not applicable", "n", ("NOT APPLICABLE", {"cyan": True})
        if shown == NOT_JUDGED:
            return "not judged", "j", ("NOT JUDGED", {"yellow": True})
        return None

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Requirements left out by -k/-m are reported as not covered, saying so (not as missing scenarios)."""
        for item in items:
            marker = item.get_closest_marker("requirement")
            if marker and marker.args and marker.args[0] in CATALOGUE:
                self.requirement_of.pop(item.nodeid, None)
                self.outcomes.deselected.setdefault(marker.args[0], []).append(item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """Allure steps and attachments of the scenarios behind the test (they have ended when it runs)."""
        evidence = self.config.stash[EVIDENCE_KEY]
        module = self.module_of.get(item.nodeid)
        runners = [self.config.stash[k] for k in (CLUSTER_RUNNER_KEY, RUNNER_KEY) if k in self.config.stash]
        if module and runners and self.config.getoption("--alluredir", None):
            for sc in REGISTRY.values():
                timing = next((r.timings[sc.name] for r in runners if sc.name in r.timings), None)
                if sc.module == module and timing is not None and timing.end is not None:
                    try:
                        evidence.allure(sc.name, timing)
                    except Exception as exc:  # evidence must never change a test's outcome
                        item.user_properties.append(("allure_evidence_error", repr(exc)))
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        """Keep the exception's own message (with the evidence the check put in it) while pytest still has it."""
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if swallowed_interrupt(item, call, report):
            self.interrupted.add(item.nodeid)  # not reached, as with any interrupt: its requirement is not-covered
            return
        if report.failed and item.nodeid in self.requirement_of:
            reason = report_reason(report, call.excinfo)
            reason = reason if report.when == "call" else f"{report.when}: {reason}"
            self.reasons[(item.nodeid, report.when)] = reason
            item.user_properties.append(("failure_reason", reason))  # pytest's JUnit carries it too
            crash = getattr(report.longrepr, "reprcrash", None)
            if crash is not None:  # pytest's JUnit message and short summary: the same first line as every report
                crash.message = headline(reason)
            namespace = getattr(item, "funcargs", {}).get("namespace")
            if isinstance(namespace, str):  # an API test: its objects, before its namespace is deleted
                self.config.stash[EVIDENCE_KEY].failed(item.nodeid, {namespace})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        known = properties.get(PROPERTY) if report.failed else properties.get(OBSERVED_PROPERTY)
        if report.failed and not known:
            self.other_failures.add(report.nodeid)
        requirement = self.requirement_of.get(report.nodeid)
        if requirement is None or (report.when != "call" and report.passed) or report.nodeid in self.interrupted:
            return
        reason, outcome = "", report.outcome
        phase = str(dict(report.user_properties).get(PHASE_PROPERTY) or "")
        if report.failed or report.skipped:
            reason = self.reasons.get((report.nodeid, report.when), "")  # failures: with their phase already
            if not reason:
                reason = report_reason(report)
                if report.failed and report.when != "call":
                    reason = f"{report.when}: {reason}"
            if report.skipped:  # not applicable, not judged (suite/judged.py) or skipped
                outcome, reason = skip_outcome(reason)
            if phase and outcome in ("failed", NOT_JUDGED):  # the first line stays the cause; where it was judged, last
                reason += f"\n({judged_in(phase)})"
        elif report.when == "call":  # a passed check may say what it accepted (e.g. IMP-9's declared rights)
            reason = "; ".join(str(v) for k, v in report.user_properties if k == NOTE_PROPERTY)
        phase = phase if outcome in ("passed", "failed", NOT_JUDGED) else ""  # a skipped test was judged nowhere
        result = RunResult(report.nodeid, outcome, reason, report.duration, known_defect=known, phase=phase)
        self.outcomes.add(requirement, result)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.config.stash[CLUSTER_TESTS_DONE_KEY].set()  # nothing waits on it any more
        if not self.requirement_of and not self.outcomes.deselected:
            return
        loaded = self.config.stash[PROFILE_KEY]
        not_certified = NO_PROFILE_REASON if loaded is None else None
        self.summary = summary = self.outcomes.summary(not_certified=not_certified, model=self.model)
        info = self.config.stash[CLUSTER_KEY][0] if CLUSTER_KEY in self.config.stash else None
        ended = conclude(
            summary,
            self.config.getoption("--accept"),
            pytest_status=int(exitstatus),
            other_failures=bool(self.other_failures),
            not_certified=not_certified,
            model=self.model,
            patched=info.source.describe() if info is not None and info.patched and info.source else None,
        )
        self.verdicts, self.result, self.known_failures = ended.verdicts, ended.result, ended.known
        session.exitstatus = self.exit_status = ended.exit_status
        self.headline = ended.headline
        reports_dir = self.config.getoption("--reports-dir")
        if reports_dir:
            self._write_reports(Path(reports_dir), summary, loaded)

    def _write_reports(self, out: Path, summary: dict[str, dict[str, Any]], loaded: LoadedProfile | None) -> None:
        run: dict[str, Any] = {"implementation": {"profile": NO_PROFILE, "reason": NO_PROFILE_REASON}}
        if loaded is not None:
            profile = loaded.profile
            run["implementation"] = {
                "profile": profile.name,
                "version": profile.version,
                "url": profile.url,
                "driver": profile.driver,
                "bindingModel": profile.binding_model,
                **({"fabricEntries": profile.fabric_entries} if profile.has_fabric else {}),  # none without a fabric
                "file": str(loaded.path),
            }
        run["wallSeconds"] = round(time.monotonic() - self.started, 1)
        mark(self.config, "teardownDone")
        if stopped_by := interrupts.interrupted():
            run["interrupted"] = stopped_by
        if CLUSTER_KEY in self.config.stash:
            info, timings = self.config.stash[CLUSTER_KEY]
            run["cluster"] = {
                "provider": info.provider,
                "kubernetes": info.version,
                "nodes": len(info.nodes),
                "featureGates": info.feature_gates,
                "bindingTimeoutSeconds": info.binding_timeout_s,
                "bringUpSeconds": round(timings.get("bring_up_s", 0.0), 2),
                **({"kubernetesSource": info.source.as_dict()} if info.source else {}),
            }
            if CLUSTER_RUNNER_KEY in self.config.stash:
                run["cluster"]["settings"] = settings_report(info, self.config.stash[CLUSTER_RUNNER_KEY])
        if (metrics := self.config.stash.get(METRICS_KEY, None)) is not None:  # SCH-10's window, the SLI
            run["schedulerMetrics"] = metrics.report()
        runners = [self.config.stash[k] for k in (CLUSTER_RUNNER_KEY, RUNNER_KEY) if k in self.config.stash]
        if runners:
            timings = {name: t for r in runners for name, t in r.timings.items()}
            measured: dict[str, list[float]] = {}
            for r in runners:
                for key, values in r.measurements.items():
                    measured.setdefault(key, []).extend(values)
            ends = [t.end for t in timings.values() if t.end is not None]
            if ends:  # scenario timings are wall-clock times; the marks count from pytest's start
                mark(self.config, "scenariosDone", max(ends) - self.started_at)
            run["scenarios"] = {
                name: {"outcome": t.outcome, "seconds": round((t.end or t.start) - t.start, 2)}
                | ({"attempt": t.attempt, "ranAgainBecause": list(t.again)} if t.again else {})
                for name, t in sorted(timings.items())
            }
            run["measurements"] = {key: summarize(v) for key, v in sorted(measured.items()) if v}
            implementation = self.config.stash.get(RUNNER_KEY, None)
            if implementation is not None and "restart" in implementation.scenarios:  # IMP-8's matrix, cell by cell
                run["restartMatrix"] = matrix_report(implementation.finished("restart"))
            if implementation is not None and (cost := implementation.finished("path-cost")):
                run["pathCost"] = cost.as_dict()  # COST-1..3: the figures against the binding model's minimum
            evidence = self.config.stash[EVIDENCE_KEY]
            run["record"] = evidence.write(timings)
            self._attach_evidence(summary, evidence)
        if (artefacts := self.config.stash[EVIDENCE_KEY].artefacts) is not None:
            artefacts.write_index()
            run["artefacts"] = {
                "index": "artefacts/index.json",
                "keptBytes": artefacts.kept,
                "fileLimitBytes": FILE_LIMIT,
                "totalLimitBytes": TOTAL_LIMIT,
                "gatherSeconds": round(artefacts.seconds, 2),
            }
        if (gate := self.config.stash.get(FOREIGN_FREE_KEY, None)) is not None:  # where each requirement was judged
            run["implementationPhases"] = {"phases": dict(PHASES), "foreignFree": gate.report()}
        marks = self.config.stash.get(MARKS_KEY, {})
        run["phases"] = dict(sorted(marks.items(), key=lambda kv: kv[1]))
        run["exit"] = {"status": self.exit_status, "headline": self.headline}
        known = self.known_defects()
        _copy_writeups(out, known)
        write_conformance_report(out / "conformance-report.yaml", summary, run, self.verdicts, known)
        title = f"KEP-5007 conformance: {loaded.profile.name if loaded else 'cluster only'}"
        write_certification_junit(out / "certification-junit.xml", summary, title, self.accepted)
        began = time.monotonic()
        try:
            page = render_html(out)
            bundle = make_bundle(out)
        except Exception as exc:  # the verdict stands without the page; say why it is missing
            self.packaging = f"the HTML report or the bundle could not be written: {exc!r}"
        else:
            self.packaging = (
                f"html {page.name} and bundle {bundle.name} ({bundle.stat().st_size / 1e6:.1f} MB, checksums in "
                f"MANIFEST.sha256) in {time.monotonic() - began:.1f}s"
            )

    def known_defects(self) -> list[dict[str, Any]]:
        """The known upstream defects this run's failures were, each with the requirements and whether accepted."""
        out = []
        for kid, rids in sorted(known_defects(self.summary).items()):
            d = catalogue()[kid]
            out.append(
                {
                    "id": kid,
                    "requirements": rids,
                    "accepted": kid in self.accepted,
                    "summary": d.summary,
                    "releases": d.releases,
                    "measured": d.measured,
                    "unaffected": d.unaffected,
                    "writeup": d.writeup,
                    "writeupCopy": f"{WRITEUPS}/{Path(d.writeup).name}",  # in the reports folder (_copy_writeups)
                }
            )
        observed: dict[str, list[str]] = {}
        for rid, entry in self.summary.items():
            for kid in entry.get("observedDefects") or []:
                observed.setdefault(kid, []).append(rid)
        for kid, rids in sorted(observed.items()):
            d = catalogue()[kid]
            out.append(
                {
                    "id": kid,
                    "requirements": [],
                    "observedBy": rids,
                    "accepted": False,
                    "summary": d.summary,
                    "releases": d.releases,
                    "measured": d.measured,
                    "unaffected": d.unaffected,
                    "writeup": d.writeup,
                    "writeupCopy": f"{WRITEUPS}/{Path(d.writeup).name}",
                }
            )
        return out

    def _attach_evidence(self, summary: dict[str, dict[str, Any]], evidence: Evidence) -> None:
        """Each requirement links the timelines (and failure snapshots) of its scenarios; a failed one also carries
        the scenario's decisive moments in words, so the certification JUnit shows the broken moment."""
        by_module: dict[str, list[str]] = {}
        for sc in REGISTRY.values():
            by_module.setdefault(sc.module, []).append(sc.name)
        for rid, entry in summary.items():
            names = [n for t in entry.get("tests", []) for n in by_module.get(self.module_of.get(t, ""), [])]
            names = [n for n in dict.fromkeys(names) if n in evidence.timelines]
            links = [p for n in names for p in [*evidence.timeline_paths(n), evidence.failures.get(n)] if p]
            links += [evidence.failures[t] for t in entry.get("tests", []) if t in evidence.failures]
            if links:
                entry["evidence"] = list(dict.fromkeys([*entry.get("evidence", []), *links]))
            if entry["outcome"] == "failed" and CATALOGUE[rid].area in IMPLEMENTATION_AREAS:
                # the implementation's own logs of the run, next to the failure that quotes them
                logs = evidence.logs.get("implementation", [])
                entry["evidence"] = list(dict.fromkeys([*entry.get("evidence", []), *logs]))
            if entry["outcome"] == "failed":
                for name in names:
                    moments = evidence.decisive(name)
                    if moments:
                        entry["reason"] += (
                            f"\ntimeline of scenario {name} (seconds from its start; [ids]: what a moment decides):\n"
                            + "\n".join(moments)
                        )


def _plain_cluster(item: pytest.Item) -> bool:
    """A cluster test pytest's own thread runs (not judged over the whole run's record)."""
    module = getattr(getattr(item, "module", None), "__name__", "")
    return module.startswith(CLUSTER_SUITE) and item.get_closest_marker("run_wide") is None


def _copy_writeups(out: Path, known: list[dict[str, Any]]) -> None:
    """Each known defect's write-up into the reports folder, so the HTML links it and the bundle carries it (an
    installed suite without the repository's docs/ keeps the path only)."""
    for d in known:
        source = REPOSITORY / d["writeup"]
        if source.is_file():
            (out / WRITEUPS).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out / d["writeupCopy"])
