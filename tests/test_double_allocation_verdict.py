"""SCH-9's scenario never passes silently (conformance/suite/cluster/test_double_allocation.py): on a release a known
defect lists, a run that saw no double allocation says "not provoked in this run"; elsewhere a pass needs binding
timeouts at which a pod was waiting, counted from the record. Pure code: a stand-in record of claim changes."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.cluster.defects import catalogue
from conformance.observe.recorder import Record
from conformance.observe.views import History
from conformance.report.catalogue import DOCS
from conformance.suite.cluster.test_double_allocation import (
    DEVICES,
    PODS,
    PROVOKE_ROUNDS,
    Overlaps,
    timed_out,
)
from conformance.suite.cluster.test_double_allocation import (
    test_no_device_allocated_again_before_a_timed_out_claim_is_cleared as sch9,
)

NS = "double"
TIMEOUT_S = 20.0


class _Record:
    def __init__(self) -> None:
        self.records: list[Record] = []

    def claim(self, at: float, name: str, device: str | None) -> None:
        status = {"allocation": {"devices": {"results": [{"driver": "d", "pool": "p", "device": device}]}}}
        obj = {"metadata": {"name": name, "namespace": NS}, "status": status if device else {}}
        revision = len(self.records) + 1
        self.records.append(Record(revision, at, "claim", "MODIFIED", NS, name, revision, obj))

    def select(self, kinds: tuple[str, ...], namespace: str | None = None) -> list[Record]:
        return [r for r in self.records if r.kind in kinds and namespace in (None, r.namespace)]


def _history(waiting: bool) -> History:
    rec = _Record()
    for name in ("app-0", "app-1", *(("app-2",) if waiting else ())):
        rec.claim(0.0, name, None)
    rec.claim(1.0, "app-0", "dev-0")
    rec.claim(1.0, "app-1", "dev-1")
    rec.claim(21.5, "app-0", None)  # both timed out in PreBind, cleared by their next cycle
    rec.claim(21.6, "app-1", None)
    return History(rec, NS)  # type: ignore[arg-type]


def test_timeouts_are_staged_only_with_a_pod_waiting() -> None:
    assert timed_out(_history(waiting=True), TIMEOUT_S) == (2, 2, 2)
    assert timed_out(_history(waiting=False), TIMEOUT_S) == (2, 2, 0)


def _run(*, known: bool, timeouts: int, staged: int) -> Overlaps:
    defect = catalogue()["double-allocation-after-binding-timeout"] if known else None
    return Overlaps("node-0", TIMEOUT_S, 6 if known else 2, timeouts=timeouts, staged=staged, known=defect)


def _verdict(run: Overlaps) -> tuple[str, str, dict[str, Any]]:
    props: dict[str, Any] = {}
    try:
        sch9(run, lambda k, v: props.__setitem__(k, v))
    except pytest.skip.Exception as exc:
        return "skipped", str(exc), props
    return "passed", "", props


def test_a_known_defects_release_that_did_not_show_it_is_not_a_pass() -> None:
    outcome, why, props = _verdict(_run(known=True, timeouts=12, staged=12))
    assert outcome == "skipped" and why.startswith("not provoked in this run"), why
    assert "double-allocation-after-binding-timeout" in why and "up to 6 rounds" in why
    assert "none of its 12 binding timeouts with a pod waiting was followed by a double allocation" in why
    assert props["timeouts_with_waiting_pods"] == 12


def test_elsewhere_a_pass_needs_timeouts_with_waiting_pods() -> None:
    assert _verdict(_run(known=False, timeouts=4, staged=4))[0] == "passed"
    outcome, why, _ = _verdict(_run(known=False, timeouts=4, staged=0))
    assert outcome == "skipped" and why.startswith("not staged"), why


def test_the_catalogue_describes_the_scenario_as_it_runs() -> None:
    checks = DOCS["SCH-9"].checks
    assert f"{PODS} pods race for {DEVICES} fabric devices" in checks
    assert f"a round being {DEVICES} timeouts" in checks and f"at most {PROVOKE_ROUNDS}: " in checks
    assert f"{DEVICES * PROVOKE_ROUNDS} chances" in checks
