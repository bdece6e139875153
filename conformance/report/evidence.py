"""The evidence of one run: the run-wide record, per-scenario timelines, snapshots at failures, gathered logs.

The plugin calls this at fixed points (cluster up, implementation up, a scenario or test failed, before the
implementation stops, before the cluster goes); at the end it writes `timelines/` and `artefacts/` and tells
each test which evidence is its own.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from conformance.observe.recorder import Recorder
from conformance.report.gather import Artefacts, snapshot
from conformance.report.timeline import Window, build, svg
from conformance.report.timeline import phases as timeline_phases

MAX_DECISIVE_LINES = 60
T = TypeVar("T")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "x"


@dataclass
class Evidence:
    """Created by the plugin; `reports` is None when the run writes no reports (then nothing is gathered)."""

    reports: Path | None
    recorder: Recorder | None = None
    driver: str | None = None
    scenarios: dict[str, Any] = field(default_factory=dict)  # name -> its Context
    timelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # scenario or test -> snapshot path
    logs: dict[str, list[str]] = field(default_factory=dict)  # "implementation", "control-plane" -> gathered logs
    progress: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # scenario -> its own phase messages
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.artefacts = Artefacts(self.reports / "artefacts") if self.reports else None

    # -- during the run -----------------------------------------------------------------------------------
    def remember(self, ctx: T) -> T:
        """Remember a scenario's context: its namespaces and leased devices are read when its timeline is built."""
        with self._lock:
            self.scenarios[ctx.scenario.name] = ctx  # type: ignore[attr-defined]
        return ctx

    def say_for(self, scenario: str, say: Callable[[str], None]) -> Callable[[str], None]:
        """The scenario's progress messages (its phases), kept with their moment for the Allure steps."""

        def said(message: str) -> None:
            with self._lock:
                self.progress.setdefault(scenario, []).append((time.time(), message))
            say(message)

        return said

    def guard(self, scenario: Any) -> Any:
        """The scenario with its function wrapped: a failure snapshots the objects before the runner cleans up."""
        run = scenario.run

        def guarded(ctx: Any) -> Any:
            try:
                return run(ctx)
            except Exception:  # a skip is not an Exception (pytest's OutcomeException is a BaseException)
                self.failed(scenario.name, set(ctx.namespaces))
                raise

        return dataclasses.replace(scenario, run=guarded)

    def failed(self, key: str, namespaces: set[str] | None) -> str | None:
        """Snapshot the objects at a failure (before the scenario's or test's cleanup removes them)."""
        if self.artefacts is None or self.recorder is None:
            return None
        with self.artefacts.timed():
            path = self.artefacts.write_yaml(
                f"objects/failure-{_slug(key)}.yaml",
                snapshot(self.recorder, set(namespaces) if namespaces is not None else None, self.driver),
                f"objects at the failure of {key}",
            )
        if path:
            with self._lock:
                self.failures[key] = path
        return path

    def end(self, what: str = "end") -> None:
        """Snapshot the objects at the end of the run (before the implementation stops and removes its slices)."""
        if self.artefacts is None or self.recorder is None or f"objects/{what}.yaml" in self.artefacts.files:
            return
        with self.artefacts.timed():
            self.artefacts.write_yaml(f"objects/{what}.yaml", snapshot(self.recorder, None, None), "objects at the end")

    def gather_logs(self, folder: Path, into: str, what: str) -> None:
        if self.artefacts is not None:
            with self.artefacts.timed():
                self.logs[into] = self.artefacts.copy_logs(folder, into, what)

    # -- at the end ---------------------------------------------------------------------------------------
    def timeline_paths(self, scenario: str) -> list[str]:
        return [f"timelines/{_slug(scenario)}.svg", f"timelines/{_slug(scenario)}.json"] if self.reports else []

    def write(self, timings: dict[str, Any]) -> dict[str, Any]:
        """Timelines of every scenario, the events, the probe's changes, the index; returns the record's stats."""
        if self.reports is None or self.recorder is None:
            return {}
        began = time.monotonic()
        identities = self.recorder.identities()
        records = self.recorder.select()
        folder = self.reports / "timelines"
        folder.mkdir(parents=True, exist_ok=True)
        for name, timing in sorted(timings.items()):
            timeline = build(self.window(name, timing), records, identities)
            if timing.outcome == "skipped" and not timeline["moments"]:
                continue  # skipped before it did anything: nothing to draw
            self.timelines[name] = timeline
            (folder / f"{_slug(name)}.json").write_text(json.dumps(timeline, indent=1))
            (folder / f"{_slug(name)}.svg").write_text(svg(timeline))
        assert self.artefacts is not None
        namespaces = {ns for ctx in self.scenarios.values() for ns in getattr(ctx, "namespaces", set())}
        events = [
            r.obj | {"namespace": r.namespace, "at": round(r.at, 3), "resourceVersion": r.revision}
            for r in records
            if r.kind == "event" and (r.namespace in namespaces or r.namespace.startswith(("dra-", "kube-")))
        ]
        self.artefacts.write_yaml("events.yaml", events, "events of the run's namespaces and the system's")
        lines = [json.dumps(dataclasses.asdict(r), separators=(",", ":")) for r in records]
        self.artefacts.write_jsonl_gz("record.jsonl.gz", lines, "the run-wide record: every change, one JSON per line")
        probe = "\n".join(json.dumps({"at": round(r.at, 3), **r.obj}) for r in records if r.kind == "probe")
        if probe:
            self.artefacts.write("fabric-probe.jsonl", probe + "\n", "each change the fabric probe showed")
        with self.artefacts._lock:
            self.artefacts.seconds += time.monotonic() - began
        self.artefacts.write_index()
        return self.recorder.stats() | {"timelineSeconds": round(time.monotonic() - began, 3)}

    def window(self, name: str, timing: Any) -> Window:
        ctx = self.scenarios.get(name)
        return Window(
            name,
            timing.start,
            timing.end or time.time(),
            timing.outcome,
            frozenset(getattr(ctx, "namespaces", set()) or set()),
            frozenset(getattr(ctx, "identities", set()) or set()),
        )

    def allure(self, name: str, timing: Any) -> None:
        """Allure: one step per phase the scenario announced, the decisive moments under the phase they fell in,
        and the timeline (SVG, JSON) and the failure snapshot as attachments of the test."""
        import allure

        if self.recorder is None:
            return
        timeline = build(self.window(name, timing), self.recorder.select(), self.recorder.identities())
        moments = [m for m in timeline["moments"] if m["decides"]]
        said = [(at - timing.start, message) for at, message in self.progress.get(name, [])]
        phases = sorted([(0.0, "start: namespaces, devices, suite objects"), *said, *timeline_phases(timeline)])
        with allure.step(f"scenario {name}: {timing.outcome} in {timeline['seconds']:.1f}s"):
            for i, (start, message) in enumerate(phases):
                end = phases[i + 1][0] if i + 1 < len(phases) else float("inf")
                with allure.step(f"{start:7.2f}s {message}"):
                    for m in moments:
                        if start <= m["t"] < end:
                            with allure.step(
                                f"{m['t']:7.2f}s {m['lane']}: {m['what']} {m['detail']} [{', '.join(m['decides'])}]"
                            ):
                                pass
        allure.attach(svg(timeline), name=f"timeline {name}", attachment_type=allure.attachment_type.SVG)
        allure.attach(
            json.dumps(timeline, indent=1), name=f"timeline {name} (JSON)", attachment_type=allure.attachment_type.JSON
        )
        if name in self.failures and self.reports is not None:
            allure.attach.file(
                str(self.reports / self.failures[name]),
                name=f"objects at the failure of {name}",
                attachment_type=allure.attachment_type.YAML,
            )

    def decisive(self, scenario: str) -> list[str]:
        """The scenario's decisive moments as text lines, for failure reasons (the timeline in words)."""
        timeline = self.timelines.get(scenario)
        if not timeline:
            return []
        lines = [
            f"{m['t']:8.3f}s {m['lane']}: {m['what']} {m['detail']}".rstrip()
            + (f"  [{', '.join(m['decides'])}]" if m["decides"] else "")
            for m in timeline["moments"]
            if m["decides"] or m["what"] in ("created", "deleted", "released")
        ]
        if len(lines) > MAX_DECISIVE_LINES:
            lines = [*lines[: MAX_DECISIVE_LINES // 2], "   ...", *lines[-MAX_DECISIVE_LINES // 2 :]]
        return lines
