"""RDY-6: a restart of the condition writer at each step of a readying loses nothing (node-local readiness gate).

Three claims are staged, one device each, and every restartable role of the profile (its condition writer: for a
per-node daemon, every node's instance at once) is killed and started again once for all three:
- before-readying: the pod is created while the role is down; its claim is allocated then;
- readying-in-flight: the readying hangs (fault injector) across the restart and is let go after it;
- ready-unreported: the readying hangs, and is let go while the role is down, so the device is ready (the readiness
  probe says so) with nobody there to report it.
Each pod must bind afterwards within the promise, its conditions True only once its device is ready, and no failure
condition may be set. A role restarted by a command cannot be held down: only readying-in-flight runs for it (said so).
Only the steps that hold a readying need the fault injector: without one, before-readying still runs (said so).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest

from conformance.cluster.manifests import claim_template, pod_with_claim_template
from conformance.cluster.waits import wait_for
from conformance.implementation.faults import FaultInjector
from conformance.implementation.profile import Role
from conformance.observe.readiness import ReadinessSampler
from conformance.observe.views import SCHEDULE_S, History
from conformance.suite.implementation.readiness import Gate, gated_node, judge, require_model, sampler, wait_bound
from conformance.suite.scenario import Context, result_fixture, scenario

STEPS = ("before-readying", "readying-in-flight", "ready-unreported")
HELD = frozenset({"readying-in-flight", "ready-unreported"})  # the steps that hold a readying (fault injector)


@dataclass
class Step:
    step: str
    role: str
    node: str
    device: str
    ns: str
    history: History
    gate: Gate | None = None
    problem: str = ""


@dataclass
class Restarts:
    steps: list[Step] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)


def _hung(injector: FaultInjector, device: str, timeout: float) -> None:
    wait_for(
        lambda: [op for op in injector.hung() if op["device"] == device],
        bool,
        timeout=timeout,
        expected=f"the readying of {device} to start and hang (fault injector)",
    )


@scenario(
    "readiness-restart",
    "the condition writer is restarted before a readying, while one is in flight, and when one is done but not "
    "reported: every pod binds, nothing is lost",
    ("RDY-6",),
    controller=("process",),
    exclusive=True,
    remote=False,
)
def readiness_restart(ctx: Context) -> Restarts:
    require_model(ctx)
    injector = ctx.profile.fault_injector
    url = ctx.implementation.resolve(injector.url) if injector is not None else None
    seen = Restarts()
    allocate_s = ctx.profile.promises.attach_s + SCHEDULE_S
    for role in ctx.profile.restartable():
        steps = STEPS if role.process is not None else ("readying-in-flight",)
        seen.not_run += [
            f"{role.name}: {s} (restarted by a command: it cannot be held down)" for s in STEPS if s not in steps
        ]
        if url is None:
            seen.not_run += [
                f"{role.name}: {s} (no faultInjector: a readying cannot be held)" for s in steps if s in HELD
            ]
            steps = tuple(s for s in steps if s not in HELD)
        if steps:
            seen.steps += _one_role(ctx, role, steps, url, allocate_s)
    return seen


def _one_role(ctx: Context, role: Role, steps: tuple[str, ...], url: str | None, allocate_s: float) -> list[Step]:
    """Stage the steps, restart the role once for all of them, and follow each pod to its binding."""
    done: list[Step] = []
    with ExitStack() as stack:
        staged: dict[str, Step] = {}
        probes: dict[str, ReadinessSampler | None] = {}
        injectors: dict[str, FaultInjector] = {}
        for step in steps:
            node, lease = gated_node(ctx, 1)
            ns = ctx.namespace(f"rdy6-{step}")
            ctx.objects.create(claim_template("gpu", ctx.device_class(lease)), ns)
            if step in HELD:
                assert url is not None  # the held steps run only with a fault injector
                injectors[step] = stack.enter_context(FaultInjector(url, frozenset(lease.identities)))
            probes[step] = stack.enter_context(sampler(ctx, lease))
            history = stack.enter_context(ctx.history(ns))
            staged[step] = Step(step, role.name, node, lease.identities[0], ns, history)
        for step in ("readying-in-flight", "ready-unreported"):
            if step in staged:
                s = staged[step]
                injectors[step].arm("hang", s.device)
                ctx.objects.create(pod_with_claim_template("app", "gpu"), s.ns)
                _hung(injectors[step], s.device, allocate_s)

        def while_down() -> None:
            if s := staged.get("before-readying"):
                ctx.objects.create(pod_with_claim_template("app", "gpu"), s.ns)
                s.history.wait(lambda h: h.allocations(), timeout=allocate_s, expected="the claim allocated")
            if s := staged.get("ready-unreported"):
                injectors[s.step].release(s.device)
                probe = probes[s.step]
                if probe is not None:
                    wait_for(
                        lambda: probe.after(s.device, time.time()),
                        lambda sample: sample is not None and sample.ready,
                        timeout=allocate_s,
                        expected=f"the probe to say {s.device} is ready (released while the writer is down)",
                    )

        window: list[float] = []
        ctx.implementation.restart_role(role, window, while_down if role.process is not None else None)
        ctx.measure("role_restart_seconds", round(window[1] - window[0], 3))
        if s := staged.get("readying-in-flight"):
            injectors[s.step].release(s.device)
        for s in staged.values():
            try:
                wait_bound(ctx, s.history, extra_s=window[1] - window[0])
            except AssertionError as exc:
                s.problem = str(exc).splitlines()[0]
            s.gate = judge(ctx, s.history, s.node, probes[s.step])
            done.append(s)
    return done


restarts = result_fixture("restarts", "readiness-restart")


@pytest.mark.requirement("RDY-6")
def test_a_restart_at_any_step_of_a_readying_loses_nothing(restarts: Restarts) -> None:
    problems = []
    for s in restarts.steps:
        assert s.gate is not None
        where = f"{s.role} restarted, step {s.step} (node {s.node}, device {s.device})"
        if s.problem or s.gate.binding is None:
            problems.append(f"{where}: the pod did not bind: {s.problem}\n  {s.gate.describe()}")
        failures = [f for a in s.gate.allocations for f in a.failures]
        if failures:
            problems.append(f"{where}: failure conditions {[(f['type'], f.get('reason')) for f in failures]}")
        problems += [f"{where}: {p}" for p in s.gate.early + s.gate.unready_binding]
    if not restarts.steps:
        pytest.skip("no step could run: " + "; ".join(restarts.not_run))
    assert not problems, "\n".join(problems)
    if restarts.not_run:
        pytest.skip("passed for the steps that ran; not run: " + "; ".join(restarts.not_run))
