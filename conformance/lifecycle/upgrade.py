"""`dra-conformance lifecycle upgrade --from OLD --k8s-version NEW`: upgrade -> downgrade -> upgrade between adjacent
releases on one etcd (the KEP's PRR: "Were upgrade and rollback tested? Was the upgrade->downgrade->upgrade path
tested?", answered upstream by hand only), judged as UPG-1..3; its first step is the version skew (SKEW-1).

One cluster starts on OLD. Components switch in the order of Kubernetes' version-skew policy: kube-apiserver first
on the way up (kube-scheduler and kube-controller-manager then run one minor older: the skew step), last on the way
down. Carried across every switch: a pod bound on a fabric device, a pod waiting in PreBind (its conditions written
only at the end), the fabric slice. At every step: the objects served as made (UPG-1), the waiting pod still waiting
(UPG-2), a pod and claim made by the previous step's releases removed and the device it freed allocated again by the
current ones (UPG-1), the run-wide invariants over every claim (UPG-3).

Broken variants: `skew-gate-off` starts the older kube-scheduler with the gate off (SKEW-1, UPG-2);
`downgrade-drops-fields` downgrades kube-apiserver with the gate off and the driver republishes its slice meanwhile
(UPG-1: the fields are gone once it is upgraded again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from conformance.cluster.versions import KubeVersion
from conformance.cluster.waits import wait_for
from conformance.lifecycle.controlplane import APISERVER, GATE, MANAGER, SCHEDULER, ControlPlane
from conformance.lifecycle.gates import Bound, Stop
from conformance.lifecycle.ledger import Ledger
from conformance.lifecycle.snapshot import claim_key, differences, fields_lost, invariants, slice_fields
from conformance.lifecycle.world import BOUND, GONE, NAMESPACE, SCHEDULE_S, WAITING, PodFate, World, results_of

VARIANTS = ("skew-gate-off", "downgrade-drops-fields")
KEP_UPGRADE = (
    "Tested manually (PRESERVE_ETCD=true hack/local-up-cluster.sh with a customised test driver): claims made by one "
    "version could be removed by the other; with the feature gate off, the new fields were ignored."
)
OLD, NEW = "old", "new"
# (step, [(component, which release)]) in the version-skew policy's order
STEPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("upgrade: kube-apiserver on NEW (skew)", ((APISERVER, NEW),)),
    ("upgrade: controller-manager and scheduler on NEW", ((MANAGER, NEW), (SCHEDULER, NEW))),
    ("downgrade: scheduler and controller-manager on OLD", ((SCHEDULER, OLD), (MANAGER, OLD))),
    ("downgrade: kube-apiserver on OLD", ((APISERVER, OLD),)),
    ("upgrade again: kube-apiserver on NEW", ((APISERVER, NEW),)),
    ("upgrade again: controller-manager and scheduler on NEW", ((MANAGER, NEW), (SCHEDULER, NEW))),
)


@dataclass
class UpgradeRun:
    plane: ControlPlane
    world: World
    ledger: Ledger
    old: KubeVersion
    new: KubeVersion
    variant: str | None = None
    bound: list[Bound] = field(default_factory=list)
    published: dict[str, dict] = field(default_factory=dict)  # the fabric slice's fields as the driver means them
    removable: str | None = None  # a pod made by the previous step's releases, removed by the next's
    waiting: str = "waiting"

    def run(self) -> None:
        w = self.world
        w.setup()
        self.published = slice_fields(w.read_slice())
        w.pod("bound")
        w.pod(self.waiting)
        w.pod("removable-0")
        for pod in ("bound", self.waiting, "removable-0"):
            if (fate := w.settle(pod)).state != WAITING:
                raise Stop(f"on {self.old}: {fate} (expected: waiting in PreBind)")
        for pod in ("bound", "removable-0"):
            fate = w.bind(pod)
            if fate.state != BOUND:
                raise Stop(f"on {self.old}: {fate} once its conditions were True")
        fate = w.fate("bound")
        assert fate.uid and fate.node and fate.claim
        self.bound.append(Bound("bound", fate.uid, fate.node, fate.claim, claim_key(w.read_claim(fate.claim))))
        self.removable = "removable-0"
        self.ledger.step(f"staged on {self.old}", self.plane.describe(), 0.0)
        for k, (step, switches) in enumerate(STEPS):
            started = time.monotonic()
            for component, which in switches:
                self._switch(component, which, k)
            self.ledger.step(step, self.plane.describe(), time.monotonic() - started)
            self.probe(k, step)
            if k == 0:
                self.skew(step)
        self.finish()

    def _switch(self, component: str, which: str, k: int) -> None:
        version = self.new if which == NEW else self.old
        if self.variant == "skew-gate-off" and k == 0 and component == APISERVER:
            self.plane.set_gate(SCHEDULER, False)  # the older scheduler without the feature
        if self.variant == "downgrade-drops-fields" and k == 3 and component == APISERVER:
            self.plane.gate[APISERVER] = False  # set_release keeps the gate as it is: off on the way down
        self.plane.set_release(component, version)
        if self.variant == "downgrade-drops-fields" and k == 3 and component == APISERVER:
            self._republish()
            self.plane.gate[APISERVER] = True  # and on again with the next upgrade

    def _republish(self) -> None:
        w = self.world
        w.cluster.kind("resource.k8s.io/v1", "ResourceSlice").delete(name=w.slice_name)
        wait_for(lambda: w.read_slice(), lambda s: s is None, timeout=30, expected="the fabric slice deleted")
        w.tracker.create(w.fabric_slice())
        self.ledger.observe("downgrade", "variant", "downgrade-drops-fields: slice republished with the gate off")

    # -- after every switch ------------------------------------------------------------------------------------------
    def probe(self, k: int, step: str) -> None:
        w, led = self.world, self.ledger
        lost = fields_lost(self.published, slice_fields(w.read_slice()))
        led.check(
            "UPG-1",
            step,
            not lost,
            "fabric slice served as published" if not lost else f"fabric slice lost fields: {'; '.join(lost[:3])}",
        )
        for b in self.bound:
            fate = w.fate(b.pod)
            same = fate.state == BOUND and fate.uid == b.uid and fate.node == b.node
            changed = differences(b.key, claim_key(w.read_claim(b.claim)))
            ok = same and not changed
            led.check(
                "UPG-1",
                step,
                ok,
                f"bound pod {b.pod} and its claim served as made"
                if ok
                else f"{fate}; claim changed: {'; '.join(changed) or 'no'}",
            )
        fate = w.fate(self.waiting)
        led.check(
            "UPG-2",
            step,
            fate.state == WAITING,
            f"pod {self.waiting} still waiting in PreBind"
            if fate.state == WAITING
            else f"{fate} (its conditions were never written)",
        )
        led.observe(step, "pod waiting in PreBind", str(fate))
        self._remove_and_reallocate(k, step)
        self._invariants(step)

    def _remove_and_reallocate(self, k: int, step: str) -> None:
        """A pod made by the previous releases deleted: its claim removed; the device it freed allocated again."""
        w, led = self.world, self.ledger
        pod = self.removable
        if pod is None:
            return
        before = w.fate(pod)
        claim = before.claim
        devices = [r["device"] for r in results_of(w.read_claim(claim))] if claim else []
        w.delete_pod(pod)
        try:
            wait_for(
                lambda: (w.fate(pod).state, w.read_claim(claim) if claim else None),
                lambda s: s[0] == GONE and s[1] is None,
                timeout=SCHEDULE_S,
                expected=f"pod {pod} and its claim {claim} removed",
                describe=lambda s: f"pod {s[0] if s else '?'}, claim {'gone' if s and s[1] is None else 'still there'}",
            )
            led.check("UPG-1", step, True, f"pod {pod} and claim {claim} made before the switch removed")
        except AssertionError as exc:
            led.check(
                "UPG-1",
                step,
                False,
                f"pod {pod} / claim {claim} made before the switch not removed: {str(exc).splitlines()[0]}",
            )
            self.removable = None
            return
        if not devices:
            raise Stop(f"{step}: claim {claim} of pod {pod} held no device")
        again = f"removable-{k + 1}"
        w.pod(again, device=devices[0])
        fate = w.settle(again)
        if fate.state == WAITING:
            fate = w.bind(again)
        held = [r["device"] for r in results_of(w.read_claim(fate.claim))] if fate.claim else []
        ok = fate.state == BOUND and held == devices[:1]
        led.check(
            "UPG-1",
            step,
            ok,
            f"device {devices[0]} freed by the removal allocated again, pod {again} bound once True"
            if ok
            else f"re-allocation of {devices[0]}: {fate}, holding {held}",
        )
        self.removable = again if ok else None

    def _invariants(self, step: str) -> None:
        w = self.world
        pods = {
            p.metadata.name: w.cluster.api.sanitize_for_serialization(p)
            for p in w.cluster.core.list_namespaced_pod(NAMESPACE).items
        }
        problems = invariants(w.claims(), pods)
        self.ledger.check(
            "UPG-3",
            step,
            not problems,
            "no device held twice, no allocation lost, no stale condition" if not problems else "; ".join(problems[:5]),
        )

    # -- the skew: scheduler and controller-manager one minor older -------------------------------------------------
    def skew(self, step: str) -> None:
        w, led = self.world, self.ledger
        w.pod("skew-ok")
        fate = w.settle("skew-ok")
        events = w.pending_events("skew-ok")
        ok = fate.state == WAITING and events > 0
        led.check(
            "SKEW-1",
            step,
            ok,
            f"pod skew-ok waits in PreBind ({events} pending events)"
            if ok
            else f"{fate} (expected: waiting in PreBind)",
        )
        if ok:
            done = w.bind("skew-ok")
            ok = done.state == BOUND and done.node == done.allocated_node
            led.check("SKEW-1", step, ok, "pod skew-ok bound to its allocated node once True" if ok else str(done))
        self._skew_failure(step)

    def _skew_failure(self, step: str) -> None:
        w, led = self.world, self.ledger
        w.pod("skew-failed")
        fate = w.settle("skew-failed")
        if fate.state != WAITING or not fate.claim:
            led.check("SKEW-1", step, False, f"pod skew-failed: {fate} (expected: waiting in PreBind)")
            return
        [failed] = [r["device"] for r in results_of(w.read_claim(fate.claim))][:1] or [None]
        w.set_conditions(fate.claim, types=[w.failed], message="attach failed (the suite playing the controller)")
        w.withdraw(failed)
        self.published.pop(failed, None)

        def moved() -> tuple[PodFate, list[str]]:
            now = w.fate("skew-failed")
            return now, [r["device"] for r in results_of(w.read_claim(now.claim))] if now.claim else []

        try:
            _now, held = wait_for(
                moved,
                lambda s: s[0].state == WAITING and bool(s[1]) and failed not in s[1],
                timeout=SCHEDULE_S + 30,
                expected=f"pod skew-failed allocated a device other than the failed {failed}",
                describe=lambda s: f"{s[0]}, holding {s[1]}",
            )
        except AssertionError as exc:
            led.check("SKEW-1", step, False, f"after a failure condition on {failed}: {str(exc).splitlines()[-1]}")
            return
        done = w.bind("skew-failed")
        ok = done.state == BOUND
        led.check(
            "SKEW-1",
            step,
            ok,
            f"failure condition on {failed}: deallocated, {held[0]} allocated, bound once True" if ok else str(done),
        )

    def finish(self) -> None:
        w, led = self.world, self.ledger
        step = f"end, on {self.new}"
        fate = w.fate(self.waiting)
        if fate.state == WAITING:
            fate = w.bind(self.waiting)
            ok = fate.state == BOUND and fate.node == fate.allocated_node
            led.check(
                "UPG-2",
                step,
                ok,
                f"pod {self.waiting} bound to its allocated node once True, after every switch" if ok else str(fate),
            )
        self._invariants(step)
        self.find()

    def find(self) -> None:
        """The KEP's account of its (manual) upgrade test beside this run's."""
        led = self.ledger
        removed = [c for c in led.checks if c.requirement == "UPG-1" and "removed" in c.what]
        upg = [c for c in led.checks if c.requirement.startswith("UPG-")]
        failed = [c for c in upg if not c.ok]
        measured = (
            f"{len(STEPS)} switches {self.old} <-> {self.new} on one etcd with {GATE} on: "
            f"{sum(c.ok for c in removed)} of {len(removed)} pods and claims made by the other release removed, "
            + (
                "every object served as made, the waiting pod bound only once True, no invariant broken"
                if not failed
                else f"{len(failed)} checks failed, first: {failed[0].step}: {failed[0].what}"
            )
        )
        led.find("PRR-5", KEP_UPGRADE, measured, bool(upg) and not failed)
