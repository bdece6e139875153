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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from conformance.observe.recorder import Recorder
from conformance.report.gather import Artefacts, snapshot
from conformance.report.timeline import Window, build, svg

MAX_DECISIVE_LINES = 25
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
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.artefacts = Artefacts(self.reports / "artefacts") if self.reports else None

    # -- during the run -----------------------------------------------------------------------------------
    def remember(self, ctx: T) -> T:
        """Remember a scenario's context: its namespaces and leased devices are read when its timeline is built."""
        with self._lock:
            self.scenarios[ctx.scenario.name] = ctx  # type: ignore[attr-defined]
        return ctx

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
        self.artefacts.write_yaml(f"objects/{what}.yaml", snapshot(self.recorder, None, None), "objects at the end")

    def gather_logs(self, folder: Path, into: str, what: str) -> None:
        if self.artefacts is not None:
            self.artefacts.copy_logs(folder, into, what)

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
            ctx = self.scenarios.get(name)
            window = Window(
                name,
                timing.start,
                timing.end or time.time(),
                timing.outcome,
                frozenset(getattr(ctx, "namespaces", set()) or set()),
                frozenset(getattr(ctx, "identities", set()) or set()),
            )
            timeline = build(window, records, identities)
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
        probe = "\n".join(json.dumps({"at": round(r.at, 3), **r.obj}) for r in records if r.kind == "probe")
        if probe:
            self.artefacts.write("fabric-probe.jsonl", probe + "\n", "each change the fabric probe showed")
        self.artefacts.seconds += time.monotonic() - began
        self.artefacts.write_index()
        return self.recorder.stats() | {"timelineSeconds": round(time.monotonic() - began, 3)}

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
