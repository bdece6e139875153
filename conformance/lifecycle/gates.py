"""`dra-conformance lifecycle gates`: DRADeviceBindingConditions switched off and on again on a live cluster (the
KEP's PRR: "Can the feature be disabled once it has been enabled? Yes. No existing claims or running pods will be
affected." and "The feature will begin working again"), judged as GATE-1..3 and recorded step by step.

Two rounds on one cluster. Each stages a pod bound on a fabric device (its conditions True) and a pod waiting in
PreBind (never given its conditions while the gate is off), then restarts kube-scheduler and kube-apiserver with the
gate off, then on again: the PRR's rollback order (scheduler first; re-enabled in the rollout order, apiserver first)
in the first round, the other order in the second. After every restart: the bound pods and their claims as before
(GATE-1); stored fields as before, also when written again (GATE-2); what a new slice keeps, what a new pod comes to,
what the waiting pods did (observations). Once both are on again: new and left-over pods served (GATE-3).

Broken variants (tests/selftest/test_lifecycle.py), each a wrong procedure a check must catch:
`scheduler-stays-off` re-enables kube-apiserver only (GATE-3); `recreate-while-off` restores the fabric slice and the
round's bound pod from their manifests while the gate is off (GATE-1, GATE-2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.waits import wait_for
from conformance.lifecycle.controlplane import APISERVER, SCHEDULER, ControlPlane
from conformance.lifecycle.ledger import Ledger
from conformance.lifecycle.snapshot import claim_key, differences, fields_lost, slice_fields
from conformance.lifecycle.world import (
    BOUND,
    BOUND_EARLY,
    GONE,
    PENDING_EVENT,
    SCHEDULE_S,
    WAITING,
    PodFate,
    World,
)

# (round name, components switched off in this order, then on in this order)
ORDERS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("rollback order", (SCHEDULER, APISERVER), (APISERVER, SCHEDULER)),
    ("other order", (APISERVER, SCHEDULER), (SCHEDULER, APISERVER)),
)
VARIANTS = ("scheduler-stays-off", "recreate-while-off")
KEP = {
    "PRR-2": "Can the feature be disabled once it has been enabled? Yes. No existing claims or running pods will be "
    "affected.",
    "PRR-3": "What happens if we reenable the feature if it was previously rolled back? The feature will begin "
    "working again.",
    "PRR-4": "Safe rollout order: kube-apiserver gate, kube-scheduler gate, the driver, the controller; rollback in "
    "reverse.",
    "PRR-6": "Older schedulers, or schedulers with the feature flag disabled, will not see the values in the new "
    "fields, and so will proceed to binding.",
}


@dataclass
class Bound:
    """A pod bound with its conditions True, and what GATE-1 compares it with."""

    pod: str
    uid: str
    node: str
    claim: str
    key: dict[str, Any]


@dataclass
class GatesRun:
    plane: ControlPlane
    world: World
    ledger: Ledger
    variant: str | None = None
    bound: list[Bound] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # pods of the round not yet bound with their conditions
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)  # the fabric slice's fields as first served
    # (apiserver gate, scheduler gate, what) -> the fate of that kind of pod, for the findings
    fates: dict[tuple[bool, bool, str], PodFate] = field(default_factory=dict)
    slices: dict[bool, dict[str, Any]] = field(default_factory=dict)  # apiserver gate -> a new slice's fields

    def run(self) -> None:
        self.world.setup()
        self.stored = slice_fields(self.world.read_slice())
        for n, (label, off, on) in enumerate(ORDERS):
            self.round(n, label, off, on)
        self.find()

    # -- one round -----------------------------------------------------------------------------------------------
    def round(self, n: int, label: str, off: tuple[str, ...], on: tuple[str, ...]) -> None:
        w = self.world
        bound, waiting = f"bound-{n}", f"waiting-{n}"
        w.pod(bound)
        w.pod(waiting)
        for pod in (bound, waiting):
            fate = w.settle(pod)
            if fate.state != WAITING:
                raise Stop(f"{label}: with the gate on everywhere, {fate} (expected: waiting in PreBind)")
        fate = w.bind(bound)
        if fate.state != BOUND:
            raise Stop(f"{label}: with the gate on everywhere, {fate} once its conditions were True")
        self._running(bound)
        assert fate.uid and fate.node and fate.claim
        self.bound.append(Bound(bound, fate.uid, fate.node, fate.claim, claim_key(w.read_claim(fate.claim))))
        self.left = [waiting]
        self.ledger.step(f"{label}: staged", self.plane.describe(), 0.0)
        for k, component in enumerate(off):
            self._switch(component, False, f"{label}: {component} gate off", n, k)
        if self.variant == "recreate-while-off":
            self._recreate(n, label)
        for k, component in enumerate(on, start=len(off)):
            if self.variant == "scheduler-stays-off" and component == SCHEDULER:
                self.ledger.observe(f"{label}: {component} gate on", "variant", "scheduler-stays-off: not restarted")
                continue
            self._switch(component, True, f"{label}: {component} gate on", n, k)
        self.works_again(n, label)
        if self.variant == "scheduler-stays-off" and not self.plane.gate[SCHEDULER]:
            # The variant's mistake is this round's re-enable alone: the next round starts as every round does.
            self._switch(SCHEDULER, True, f"{label}: {SCHEDULER} gate on (late, variant)", n, len(off) + len(on))

    def _switch(self, component: str, on: bool, step: str, n: int, k: int) -> None:
        started = time.monotonic()
        self.plane.set_gate(component, on)
        self.ledger.step(step, self.plane.describe(), time.monotonic() - started)
        self.probe(step, f"new-{n}-{k}")

    # -- after every restart -----------------------------------------------------------------------------------
    def probe(self, step: str, new_pod: str) -> None:
        w, led = self.world, self.ledger
        w.pod(new_pod)  # decided while the rest is checked
        for b in self.bound:
            fate = w.fate(b.pod)
            same = fate.state == BOUND and fate.uid == b.uid and fate.node == b.node
            led.check(
                "GATE-1",
                step,
                same,
                f"running pod {b.pod} stays bound on {b.node}"
                if same
                else f"{fate}, was bound on {b.node} (uid {b.uid})",
            )
            if same:
                phase = (w.read_pod(b.pod) or {}).get("status", {}).get("phase")
                led.check("GATE-1", step, phase == "Running", f"pod {b.pod} phase {phase} (expected Running)")
            changed = differences(b.key, claim_key(w.read_claim(b.claim)))
            led.check(
                "GATE-1",
                step,
                not changed,
                f"claim {b.claim} of running pod {b.pod} "
                + ("unchanged" if not changed else "changed: " + "; ".join(changed)),
            )
        self._stored_fields(step)
        self._new_slice(step)
        for pod in list(self.left):
            fate = w.fate(pod)
            staged = pod.startswith("waiting-")
            led.observe(
                step,
                "pod waiting in PreBind when the round began" if staged else "pod left pending by an earlier step",
                str(fate),
            )
            if staged:
                self.fates.setdefault(self._state("waiting"), fate)
            if fate.state in (BOUND, BOUND_EARLY):
                self.left.remove(pod)
        asked = time.monotonic()
        fate = w.settle(new_pod)
        led.observe(step, "new pod", f"{fate}; settled {time.monotonic() - asked:.0f} s after it was made")
        self.fates.setdefault(self._state("new"), fate)
        if fate.state not in (BOUND, BOUND_EARLY):
            self.left.append(new_pod)

    def _state(self, what: str) -> tuple[bool, bool, str]:
        return self.plane.gate[APISERVER], self.plane.gate[SCHEDULER], what

    def _stored_fields(self, step: str) -> None:
        """GATE-2: the fabric slice and the claims as served, then as written again."""
        w, led = self.world, self.ledger
        lost = fields_lost(self.stored, slice_fields(w.read_slice()))
        led.check(
            "GATE-2",
            step,
            not lost,
            "fabric slice's binding fields served as published"
            if not lost
            else f"fabric slice {w.slice_name} lost fields: {'; '.join(lost[:3])}",
        )
        api = w.cluster.kind("resource.k8s.io/v1", "ResourceSlice")
        api.patch(
            name=w.slice_name,
            body={"metadata": {"labels": {"lifecycle/step": _label(step)}}},
            content_type="application/merge-patch+json",
        )
        lost = fields_lost(self.stored, slice_fields(w.read_slice()))
        led.check(
            "GATE-2",
            step,
            not lost,
            "fabric slice keeps its binding fields when written again"
            if not lost
            else f"fabric slice written again lost fields: {'; '.join(lost[:3])}",
        )
        for b in self.bound:
            if w.read_claim(b.claim) is None:
                continue  # gone: GATE-1 says so
            before = claim_key(w.read_claim(b.claim))["results"]
            stored = w.set_conditions(b.claim, message=f"written again at {step}")
            after = claim_key(stored)["results"]
            led.check(
                "GATE-2",
                step,
                before == after,
                f"claim {b.claim} keeps its allocation's conditions when its status is written again"
                if before == after
                else f"claim {b.claim} written again: results {before} -> {after}",
            )

    def _new_slice(self, step: str) -> None:
        """What a slice published now keeps (recorded: the KEP says the server drops the fields with its gate off)."""
        w = self.world
        probe = w.fabric_slice(name=f"{w.driver}-probe-{_label(step)}", driver=f"probe-{w.driver}")
        probe["spec"]["devices"] = probe["spec"]["devices"][:1]
        w.tracker.create(probe)
        fields = slice_fields(w.read_slice(probe["metadata"]["name"]))
        kept = fields.get("dev-0") or {}
        self.slices.setdefault(self.plane.gate[APISERVER], kept)
        self.ledger.observe(
            step,
            "new slice",
            f"a slice published now keeps {sorted(kept) or 'none'} of its binding fields "
            "(bindsToNode, bindingConditions, bindingFailureConditions)",
        )
        w.cluster.kind("resource.k8s.io/v1", "ResourceSlice").delete(name=probe["metadata"]["name"])

    def _recreate(self, n: int, label: str) -> None:
        """The `recreate-while-off` variant: the fabric slice and the round's bound pod restored from their manifests
        while the gate is off (what a backup restored through the API, or a driver republishing, would do)."""
        w = self.world
        slices = w.cluster.kind("resource.k8s.io/v1", "ResourceSlice")
        slices.delete(name=w.slice_name)
        wait_for(lambda: w.read_slice(), lambda s: s is None, timeout=30, expected="the fabric slice deleted")
        w.tracker.create(w.fabric_slice())
        w.delete_pod(f"bound-{n}")
        wait_for(lambda: w.fate(f"bound-{n}").state, lambda s: s == GONE, timeout=60, expected=f"pod bound-{n} deleted")
        w.pod(f"bound-{n}")
        self.ledger.observe(
            f"{label}: restored while off", "variant", "recreate-while-off: fabric slice and bound pod recreated"
        )

    # -- once both run with the gate on again ---------------------------------------------------------------------
    def works_again(self, n: int, label: str) -> None:
        w, led = self.world, self.ledger
        step = f"{label}: gate on again"
        after = f"after-{n}"
        w.pod(after)
        fate = w.settle(after)
        events = w.pending_events(after)
        led.check(
            "GATE-3",
            step,
            fate.state == WAITING and events > 0,
            f"new pod {after} waits in PreBind ({events} {PENDING_EVENT} events)"
            if fate.state == WAITING
            else f"new pod: {fate} (expected: waiting in PreBind)",
        )
        if fate.state == WAITING:
            self._bound_once_true(after, step)
        deadline = time.monotonic() + SCHEDULE_S  # one for them all: the scheduler retries them together
        for pod in self.left:
            fate = self._served(pod, deadline)
            led.observe(step, "pod left pending while the gate was off", str(fate))
            if fate.state == WAITING:
                self._bound_once_true(pod, step)
            elif fate.state != BOUND_EARLY:
                led.check("GATE-3", step, False, f"pod {pod} left pending while the gate was off: {fate}")
        self.left = []

    def _bound_once_true(self, pod: str, step: str) -> None:
        fate = self.world.bind(pod)
        ok = fate.state == BOUND and fate.node == fate.allocated_node
        self.ledger.check(
            "GATE-3",
            step,
            ok,
            f"pod {pod} bound to its allocated node once its conditions were True"
            if ok
            else f"{fate} after its conditions were set True",
        )

    def _served(self, pod: str, deadline: float) -> PodFate:
        """A pod left pending: wait until the scheduler (with the gate on again) allocates it or binds it; an
        Unschedulable condition from before the switch may still show meanwhile."""
        try:
            return wait_for(
                lambda: self.world.fate(pod),
                lambda f: f.state in (WAITING, BOUND, BOUND_EARLY),
                timeout=max(1.0, deadline - time.monotonic()),
                expected=f"pod {pod} allocated again",
                describe=str,
                max_interval=1.0,
            )
        except AssertionError:
            return self.world.fate(pod)

    def _running(self, pod: str) -> None:
        wait_for(
            lambda: (self.world.read_pod(pod) or {}).get("status", {}).get("phase"),
            lambda p: p == "Running",
            timeout=SCHEDULE_S,
            expected=f"pod {pod} Running (kwok)",
        )

    # -- the KEP's sentences beside what happened -----------------------------------------------------------------
    def find(self) -> None:
        led, f = self.ledger, self.fates
        new_off, wait_off = f.get((True, False, "new")), f.get((True, False, "waiting"))
        if new_off:
            led.find(
                "PRR-6",
                KEP["PRR-6"],
                "kube-scheduler with the gate off (kube-apiserver on), a NEW pod on a device with binding "
                f"conditions: {new_off.state}" + (f" ({new_off.detail})" if new_off.detail else ""),
                new_off.state in (BOUND, BOUND_EARLY),
            )
        if wait_off:
            led.find(
                "PRR-6",
                KEP["PRR-6"],
                f"kube-scheduler restarted with the gate off, a pod that was waiting in PreBind: {wait_off.state}",
                wait_off.state in (BOUND, BOUND_EARLY),
            )
        gate1 = [c for c in led.checks if c.requirement == "GATE-1"]
        early = [fate for key, fate in f.items() if key[2] == "waiting" and fate.state == BOUND_EARLY]
        running = (
            "running pods and their claims unchanged"
            if gate1 and all(c.ok for c in gate1)
            else "running pods or their claims changed (GATE-1 failed)"
        )
        waiting = (
            f"; but a pod waiting in PreBind was {early[0].state} when kube-scheduler restarted with the gate off"
            if early
            else ""
        )
        led.find("PRR-2", KEP["PRR-2"], running + waiting, bool(gate1) and all(c.ok for c in gate1) and not early)
        gate3 = [c for c in led.checks if c.requirement == "GATE-3"]
        led.find(
            "PRR-3",
            KEP["PRR-3"],
            "new pods wait in PreBind and bind once True; pods left pending were served"
            if gate3 and all(c.ok for c in gate3)
            else "not every pod was served once the gate was on again (GATE-3 failed)",
            bool(gate3) and all(c.ok for c in gate3),
        )
        wrong = f.get((False, True, "new"))
        dropped = self.slices.get(False)
        if wrong or dropped is not None:
            parts = []
            if dropped is not None:
                parts.append(
                    "a slice published while kube-apiserver's gate is off keeps "
                    f"{sorted(dropped) or 'none'} of its binding fields"
                )
            if wrong:
                parts.append(
                    "with kube-apiserver's gate off and kube-scheduler's on (the other order), a new pod: "
                    f"{wrong.state}" + (f" ({wrong.detail})" if wrong.detail else "")
                )
            led.find("PRR-4", KEP["PRR-4"], "; ".join(parts), True)


class Stop(RuntimeError):
    """The cluster did not do what every later step builds on (e.g. no wait in PreBind with the gate on)."""


def _label(step: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in step.lower()).strip("-")[:60]
