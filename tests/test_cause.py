"""A failed wait's message leads with its cause (suite/cause.py): the record's story and the API server's refusals on
the first line, the wait's symptom after it; a message that already names its cause keeps its first line; "nothing
observed" is never said while the record holds the namespace's objects. The runner is driven with stand-ins (a fake
cluster and implementation, said so here), the record and the audit log are real files and a real Recorder."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from claim_events import NS, READY, claim, record_of

from conformance.cluster.audit import parse
from conformance.cluster.providers.base import ClusterInfo
from conformance.cluster.waits import WaitTimeout
from conformance.implementation.profile import API_VERSION, KIND, Profile
from conformance.observe.devices import DevicePool
from conformance.observe.recorder import Recorder
from conformance.observe.views import History
from conformance.suite.cause import SYMPTOM_LABEL, Dealings, Evidence, in_one_line, is_wait_symptom, lead_with
from conformance.suite.scenario import Context, Scenario, ScenarioRunner

ACCOUNT = "dra-fabric-system/reference-controller"
SYMPTOM = f"timed out after 60s waiting for the pod to be bound (namespace {NS})"
STORY = f"claim {NS}/app-gpu-1 allocated 3 times on n1, each cleared by the binding timeout after 20.4 s"


def _refusal(at: float, namespace: str = NS) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
    return json.dumps(
        {
            "verb": "update",
            "user": {"username": f"system:serviceaccount:{ACCOUNT.replace('/', ':')}"},
            "objectRef": {"resource": "resourceclaims", "subresource": "status", "namespace": namespace, "name": "c"},
            "responseStatus": {
                "code": 422,
                "message": "status.devices: Forbidden: changing status.devices requires "
                'resource="resourceclaims/driver", verb="[arbitrary-node:update]"',
            },
            "stageTimestamp": stamp,
        }
    )


def test_a_symptom_first_line_gives_way_to_the_cause_and_a_prefix_stays() -> None:
    found = Evidence(story=STORY, refusals=[parse(_refusal(time.time()))])  # type: ignore[list-item]
    message = lead_with(f"{SYMPTOM}\nlast seen: allocation at revision 7", found)
    first, second, third, *_ = message.splitlines()
    assert first == f"{STORY}; update resourceclaims/driver arbitrary-node refused once for {ACCOUNT} (422)"
    assert (second, third) == (f"{SYMPTOM_LABEL}{SYMPTOM}", "last seen: allocation at revision 7")
    prefixed = lead_with(f"IMP-17: while others were live, the pod was not readied: {SYMPTOM}", found)
    assert prefixed.splitlines()[0].startswith(f"IMP-17: while others were live, the pod was not readied: {STORY}; ")
    assert not is_wait_symptom(prefixed.splitlines()[0]) and is_wait_symptom(prefixed.splitlines()[1])


def test_a_message_that_names_its_cause_keeps_its_first_line_and_gets_the_evidence_after_it() -> None:
    found = Evidence(story=STORY, stories=[STORY, "claim x/y allocated once on n2"], audit="no audit log")
    message = lead_with("IMP-4: the failed device f1 was offered again at revision 9", found)
    lines = message.splitlines()
    assert lines[0] == "IMP-4: the failed device f1 was offered again at revision 9"
    assert "the record, claim by claim:" in lines and "no audit log" in lines


def test_without_refusals_the_rights_then_the_implementations_words_stand_beside_the_story() -> None:
    rights = "ns/ctrl (process controller), a central writer, lacks resourceclaims/driver arbitrary-node:update"
    assert Evidence(story=STORY, rights=[rights], logged="[ctrl] x").cause() == f"{STORY}; {rights}"
    assert Evidence(logged="[ctrl] forbidden").cause() == "the implementation logged: [ctrl] forbidden"
    assert lead_with(SYMPTOM, Evidence()) == SYMPTOM  # nothing known: the symptom is all there is (and says so)


def test_a_wait_on_the_record_says_what_it_holds_never_nothing_observed() -> None:
    record = record_of([(1.0, claim(1, 0.5))])
    with pytest.raises(WaitTimeout) as caught:
        History(record, NS).wait(lambda h: h.binding(), timeout=0.01, expected="the pod to be bound")
    assert "nothing observed" not in str(caught.value) and "allocation at revision 1" in str(caught.value)
    with pytest.raises(WaitTimeout) as empty:
        History(Recorder(None, "r"), NS).wait(lambda h: h.binding(), timeout=0.01, expected="the pod to be bound")
    assert f"the record holds no claim or pod of namespace {NS}" in str(empty.value)


@dataclass
class _Objects:
    run_id: str = "r"

    def cleanup(self) -> list[str]:
        return []


class _Cluster:
    user_agent = ""

    def __init__(self, audit: Path) -> None:  # 1.35: no resourceclaims/driver, so no SubjectAccessReview is asked
        self.info = ClusterInfo("c", "local", Path("/dev/null"), "v1.35.0", {}, 20, True, [], audit_log=audit)

    def close(self) -> None:
        pass


class _Implementation:
    def log_since(self, marks: dict[str, int], mention: list[str], avoid: set[str]) -> dict[str, list[str]]:
        assert NS in mention and "other-ns" in avoid
        return {"controller": [f"E1207 update {NS}/app-gpu-1: forbidden: arbitrary-node:update"]}


PROFILE = Profile.model_validate(
    {"apiVersion": API_VERSION, "kind": KIND, "name": "p", "version": "1", "driver": "d.example.com"}
)


def _context(sc: Scenario, record: Recorder, audit: Path) -> Context:
    return Context(
        scenario=sc,
        cluster=_Cluster(audit),  # type: ignore[arg-type]
        implementation=_Implementation(),  # type: ignore[arg-type]
        profile=PROFILE,
        pool=DevicePool("d.example.com", "uuid", {}),
        objects=_Objects(),  # type: ignore[arg-type]
        say=lambda _m: None,
        record=record,
    )


def _three_timeouts(now: float) -> Recorder:
    events: list[tuple[float, dict[str, Any]]] = []
    for i in range(3):
        start = now + 30 * i
        events += [(start + 0.1, claim(10 * i + 1, start)), (start + 20.4, claim(10 * i + 2, None))]
    record = record_of(events)
    record.feed("pod", "ADDED", {"metadata": {"name": "p", "namespace": "other-ns", "resourceVersion": "99"}})
    return record


def test_a_wait_a_scenario_keeps_as_an_observation_says_its_cause_in_one_line(tmp_path: Path) -> None:
    """A restart cell's pod that did not bind: the cell's problem quotes the cause, the symptom in brackets."""
    now = float(int(time.time()))
    ctx = _context(Scenario("s", "d", ("IMP-8",), lambda ctx: None, "m"), _three_timeouts(now), tmp_path / "none")
    found = in_one_line(ctx, f"{SYMPTOM}\nlast seen: x", now, {NS})
    assert found.startswith(f"{STORY}; binding condition {READY} never written; status.devices written by nobody")
    assert found.endswith(f" ({SYMPTOM_LABEL}{SYMPTOM})")
    assert in_one_line(ctx, "the cell was not staged\nx", now, {NS}) == "the cell was not staged"


def test_the_runner_leads_a_scenarios_timed_out_wait_with_the_record_and_the_refusals(tmp_path: Path) -> None:
    record = _three_timeouts(float(int(time.time())))  # allocationTimestamp has whole seconds
    audit = tmp_path / "audit.log"

    def run(ctx: Any) -> None:
        ctx.namespaces.add(NS)
        refused = [_refusal(time.time()) for _ in range(37)] + [_refusal(time.time(), "other-ns")]
        audit.write_text("\n".join(refused) + "\n")
        raise WaitTimeout(f"{SYMPTOM}\nlast seen: pod not bound")

    sc = Scenario("s", "d", ("IMP-2",), run, "m", implementation=True)
    runner = ScenarioRunner([sc], lambda sc: _context(sc, record, audit), None, lambda _m: None)
    runner.start()
    with pytest.raises(AssertionError) as caught:
        runner.result("s")
    runner.join()
    assert not isinstance(caught.value, WaitTimeout)  # its first line is no wait's symptom any more
    lines = str(caught.value).splitlines()
    assert lines[0] == (
        f"{STORY}; binding condition {READY} never written; status.devices written by nobody; "
        f"update resourceclaims/driver arbitrary-node refused 37 times for {ACCOUNT} (422)"
    )
    assert lines[1:3] == [f"{SYMPTOM_LABEL}{SYMPTOM}", "last seen: pod not bound"]
    assert any(line.startswith("  [controller] E1207 update") for line in lines)


def test_imp17_leads_with_what_the_stack_did_with_other_drivers_objects_strongest_first() -> None:
    """IMP-17's first line (suite/cause.py Dealings): its writes to another driver's objects, else its requests on
    them the API server refused, else its log lines naming them (a loud one first, with whose each name is)."""
    refused = parse(_refusal(time.time(), "other-ns"))
    assert refused is not None
    said = "[controller] reconcile failed: claim other-ns/waiting-1: pool other-driver-fabric is not one of ours"
    line = f"  [controller] 2026-12-07 04:38:44,038 {said.removeprefix('[controller] ')}"
    found = Dealings(
        writes=["ResourceClaim other-ns/waiting-1 at revision 9: status.devices p/d holds what the suite never wrote"],
        refusals=[refused],
        lines=["  [controller] saw other-ns/pending-1", line],
        names={"other-driver-fabric": "a pool of the suite's coexistence check (IMP-17: ...) (driver o.example.com)"},
        spaces={"other-ns": "claims of driver o.example.com"},
    )
    assert found.cause().startswith("the implementation wrote another driver's objects: ResourceClaim other-ns/")
    found.writes = []
    assert found.cause() == (
        f"the implementation acted on another driver's objects and was refused: update resourceclaims/driver "
        f"arbitrary-node refused once for {ACCOUNT} (422), first on other-ns/c"
    )
    found.refusals = []
    assert found.cause() == (
        f"the implementation logged about another driver's objects: {said} (other-driver-fabric: a pool of the "
        "suite's coexistence check)"
    )
    assert Dealings().cause() == ""
