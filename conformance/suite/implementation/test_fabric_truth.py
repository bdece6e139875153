"""IMP-10..12: the fabric's truth for every device of every implementation scenario, judged once all of them have
ended, from the run-wide record (conformance/observe/attachments.py says how each moment is compared). At the end
it waits (from the record, up to detachSeconds) until the fabric holds no attachment of the run, then judges; an
attachment still held then is a failure.

The other scenarios walk their own paths; this module adds one that walks the moments these rules are about, so
they are judged in every run whichever scenarios are selected with it: pod A binds with a (slowed) attach and stays
bound; the controller is restarted while A is bound (where the profile names its process) and A is watched for
HOLD_S more; then pod B's claim goes away while its slowed attach is in flight (released before ready), and A goes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import claim_template, pinned_pod
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import LoadedProfile
from conformance.observe.attachments import Judge, Verdicts, stamp
from conformance.observe.recorder import ANY_DEVICE, PROBE_PERIOD_S, Recorder
from conformance.observe.slices import BIND_SLACK_S
from conformance.suite.implementation.outcome import Outcome, bind_timeout, follow
from conformance.suite.judged import nothing_judged
from conformance.suite.scenario import Context, ScenarioRunner, result_fixture, scenario

# Attaches slowed by this much: a condition reported before the fabric finished has that long to show, and B's claim
# is deleted while its attach is in flight.
SLOW_S = 3.0
HOLD_S = 3.0  # A stays bound this long after the restart (or B's release): what happens to its device meanwhile


@dataclass
class Lifecycle:
    node: str
    a: Outcome | None = None
    b_device: str | None = None  # the device whose attach was in flight when B's claim was deleted
    b_state: tuple[str, str] | None = None  # what the probe said of it then
    restarted: str = ""  # what was restarted while A was bound


def _delete(ctx: Context, ns: str, pod: str, claims: list[str]) -> None:
    ctx.cluster.core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
    for claim in claims:
        try:
            ctx.cluster.resource.delete_namespaced_resource_claim(claim, ns)
        except ApiException as exc:
            if exc.status != 404:  # the resourceclaim controller may have removed the generated claim already
                raise


@scenario(
    "device-lifecycle",
    "a pod bound through a slow attach, a claim deleted while its attach is in flight, a controller restart while a "
    "pod is bound: the fabric's truth at every moment",
    ("IMP-10", "IMP-11", "IMP-12"),
    probe=True,
    exclusive=True,  # it restarts the shared controller (where it can): other scenarios must not see that
)
def device_lifecycle(ctx: Context) -> Lifecycle:
    probe = ctx.probe
    assert probe is not None  # probe=True: skipped without one
    # Two devices on a node without node-local ones (count-based: capacity for two, the node this scenario's alone,
    # since the device an entry gets is known only once attached and faults select the attaches to the node).
    node, lease, ns_a = ctx.remote_fabric(count=2, exclusive=ctx.counted)
    ns_b = ctx.namespace()
    ctx.objects.create(claim_template("gpu", ctx.device_class(lease)), ns_b)
    seen = Lifecycle(node)
    injector = ctx.profile.fault_injector
    url = ctx.implementation.resolve(injector.url) if injector else None
    scope = (frozenset(lease.identities), frozenset({node}) if ctx.counted else frozenset())
    faults = FaultInjector(url, *scope) if url else None
    try:
        if faults is not None:  # both attaches slowed (which pod gets which device is the scheduler's choice)
            targets: list[dict[str, Any]] = (
                [{"node": node, "count": 2}] if ctx.counted else [{"device": i} for i in lease.identities]
            )
            for target in targets:
                faults.arm("slow", delaySeconds=SLOW_S, **target)
        with ctx.history(ns_a) as history_a:
            ctx.objects.create(pinned_pod("a", "gpu", node), ns_a)
            seen.a = follow(ctx, history_a, node, bind_timeout(ctx.profile, SLOW_S))
        used = {i for i in seen.a.final_identities() if i}
        if ctx.profile.controller.process is not None:
            ctx.implementation.restart(ctx.profile.controller.process)
            seen.restarted = f"{ctx.profile.controller.process} while pod a was bound"
        probe.after(time.time() + HOLD_S, timeout=HOLD_S + 10)  # A observed, bound, for HOLD_S more

        with ctx.history(ns_b) as history_b:
            ctx.objects.create(pinned_pod("b", "gpu", node), ns_b)

            def in_flight() -> tuple[str, tuple[str, str]] | None:
                states = probe.now()
                if ctx.counted:  # the one device on the scenario's own node that is not (yet) attached: B's
                    found = sorted(i for i, s in states.items() if s[0] == node and s[1] != "attached")
                else:
                    found = [i for i in lease.identities if i not in used and i in states]
                return (found[0], states[found[0]]) if found else None

            seen.b_device, seen.b_state = wait_for(
                in_flight,
                bool,
                timeout=ctx.profile.promises.attach_s + BIND_SLACK_S,
                expected=f"the attach for pod {ns_b}/b to start (the probe to list its device on {node})",
                interval=PROBE_PERIOD_S,
                max_interval=PROBE_PERIOD_S,
            )
            _delete(ctx, ns_b, "b", list(history_b.latest("claim")))
    finally:
        if faults is not None:
            faults.close()
    _delete(ctx, ns_a, "a", list(history_a.latest("claim")))
    return seen


lifecycle = result_fixture("lifecycle", "device-lifecycle")


NOTHING = {  # why a rule had nothing to judge, when no device was left unidentified
    "IMP-10": "no pod of the run was bound with a device the fabric deals in",
    "IMP-11": "no binding condition, and no condition meaning reschedule, was True on an allocated device",
    "IMP-12": "the fabric probe never listed a device attached during the run",
}


@dataclass
class Truth:
    verdicts: Verdicts
    judged_s: float  # how long judging the whole record took
    waited_s: float  # how long the end of the run waited for the fabric to let go
    left: dict[str, tuple[str, str]]  # the run's attachments the fabric still held at the end
    failed: dict[str, str] = field(default_factory=dict)  # implementation scenarios that failed -> first line


@pytest.fixture(scope="module")
def truth(
    scenarios: ScenarioRunner, profile: LoadedProfile, recorder: Recorder, request: pytest.FixtureRequest
) -> Truth:
    prof = profile.profile
    if prof.fabric_probe is None:
        pytest.skip("the profile declares no fabricProbe: attachments cannot be observed")
    if not scenarios.wait_all():
        pytest.skip("no implementation scenario ran in this session: nothing to judge")
    # While the suite restarted a process of the stack (IMP-8, device-lifecycle), nothing of it could act: IMP-12
    # counts those windows out of every device's detachSeconds, as the holds of the restart matrix's own cells.
    for began, ended in request.getfixturevalue("implementation").down:
        recorder.hold_back(ANY_DEVICE, began, ended)
    before = set(recorder.samples()[0].states) if recorder.samples() else set()
    began = time.monotonic()
    try:
        left = wait_for(
            lambda: {i: s for i, s in recorder.now().items() if i not in before},
            lambda left: not left,
            timeout=prof.promises.detach_s + 2 * PROBE_PERIOD_S,
            expected="the fabric to hold no attachment of the run once every scenario has ended",
            interval=PROBE_PERIOD_S,
            max_interval=PROBE_PERIOD_S,
        )
    except WaitTimeout:
        left = {i: s for i, s in recorder.now().items() if i not in before}
    waited = time.monotonic() - began
    began = time.monotonic()
    reschedule = frozenset(t for t, meaning in prof.failure_conditions.items() if meaning == "reschedule")
    judge = Judge(prof.driver, prof.identity_attribute, prof.promises.detach_s, reschedule=reschedule)
    verdicts = judge.judge(recorder)
    truth = Truth(verdicts, round(time.monotonic() - began, 3), round(waited, 3), left, scenarios.failures())
    judged = ", ".join(f"{rule} {n}" for rule, n in sorted(verdicts.checked.items()))
    scenarios.say(
        f"fabric truth: {len(recorder.samples())} probe answers (period {PROBE_PERIOD_S:g}s); judged {judged} in "
        f"{truth.judged_s:.2f}s after waiting {truth.waited_s:.1f}s for the fabric to let go"
    )
    return truth


def _verdict(truth: Truth, rule: str, record_property: Any) -> None:
    v = truth.verdicts
    record_property("probe_period_seconds", PROBE_PERIOD_S)
    record_property("judged", v.checked.get(rule, 0))
    record_property("judge_seconds", truth.judged_s)
    for note in v.unjudged.get(rule, [])[:20]:
        record_property("not_judged", note)
    found = v.violations.get(rule, [])
    assert not found, f"{len(found)} violations (probe period {PROBE_PERIOD_S:g}s):\n  " + "\n  ".join(found[:20])
    if not v.checked.get(rule):
        why = v.unjudged.get(rule) or [NOTHING[rule]]
        nothing_judged(f"{rule}: nothing could be judged: {why[:3]}", truth.failed, record_property)


@pytest.mark.requirement("IMP-10")
def test_the_lifecycle_walked_every_moment(lifecycle: Lifecycle, record_property: Any) -> None:
    """The walk itself: A bound where the fabric attached its device, B's claim released while attaching."""
    assert lifecycle.a is not None
    problems = lifecycle.a.binding_problems()
    assert not problems, "\n".join(problems)
    assert lifecycle.b_state is not None and lifecycle.b_state[1] != "attached", (
        f"B's claim was released only after its attach completed ({lifecycle.b_device}: {lifecycle.b_state}): "
        "the release before ready was not walked"
    )
    record_property("restarted", lifecycle.restarted or "nothing (the profile names no controller process)")


@pytest.mark.requirement("IMP-10")
def test_a_device_stays_attached_to_the_node_of_every_pod_using_it(truth: Truth, record_property: Any) -> None:
    _verdict(truth, "IMP-10", record_property)


@pytest.mark.requirement("IMP-11")
def test_binding_conditions_are_true_only_while_the_fabric_says_attached(truth: Truth, record_property: Any) -> None:
    _verdict(truth, "IMP-11", record_property)


@pytest.mark.requirement("IMP-12")
def test_no_attachment_outlives_its_claim(truth: Truth, record_property: Any) -> None:
    record_property("end_wait_seconds", truth.waited_s)
    assert not truth.left, (
        f"at the end of the run ({stamp(time.time())}), every scenario ended, the fabric still holds attachments of "
        f"the run: {truth.left}"
    )
    _verdict(truth, "IMP-12", record_property)
