"""The loop: read a snapshot (caches + fabric), decide, execute the plan; fabric operations run in workers.

A pass runs whenever a watched object changes, an operation ends, or `poll_s` passed (the fabric has no watch,
and idle/quarantine timers need a clock). Every pass decides from scratch, so a lost event or a restart costs
at most one pass.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ..nodes import NodeLister
from ..pools import brief
from .decide import decide
from .decide.broken import forgotten_failure
from .decide.holdings import assignment_key, holdings
from .decide.plan import Assignment, AssignmentKey, Attach, ConditionWrite, Detach, Failure, Memory, Plan, Snapshot
from .fabric import FabricClient, FabricUnavailable
from .kube import Kube
from .metrics import Metrics
from .model import Claim, FabricDevice, TaintRule, node_copies
from .roles import Role, share
from .settings import Purpose, Settings
from .statelog import StateLog
from .watch import Cache

log = logging.getLogger("reference-controller")
T = TypeVar("T")


class ForeignClaim(RuntimeError):
    """--broken-abort-on-other-driver (selftests only): a claim of another driver aborted the pass, and every pass
    after it, as a real stack's reconcile aborted on a pool it did not know (IMP-17 must catch it).
    --broken-abort-pass-on-other-driver: each pass that meets one aborts; once none is left, passes work again."""


def foreign_claim(allocated: list[dict[str, Any]], driver: str, sticky: bool = True) -> str:
    """The first allocated claim with a result of another driver that has binding conditions, in words ("": none)."""
    for obj in allocated:
        for r in obj["status"]["allocation"].get("devices", {}).get("results") or []:
            if r.get("driver") != driver and r.get("bindingConditions"):
                meta = obj["metadata"]
                then = "every reconcile pass from now on" if sticky else "this reconcile pass"
                return (
                    f"claim {meta['namespace']}/{meta['name']}: pool {r['pool']} of driver {r['driver']} is not one "
                    f"of ours; aborting {then}"
                )
    return ""


def attachment_records(path: str) -> dict[str, str]:
    """--broken-attachment-records: device uuid -> node of every attach recorded (none: an empty record)."""
    try:
        return dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError):
        return {}


def record_attachment(path: str, uuid: str, node: str) -> None:
    records = attachment_records(path) | {uuid: node}
    tmp = Path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(records))
    tmp.replace(path)


@dataclass
class Caches:
    claims: Cache
    slices: Cache
    taints: Cache

    def all(self) -> list[Cache]:
        return [self.claims, self.slices, self.taints]


CONDITION_WRITERS = 8
# Fabric operations in flight at once; each blocks its thread for the fabric's time (1 s in the example fabric), so
# this caps attaches per second: 32 held 1000 pods in PreBind to 32 attaches/s (SCALE-1; README.md, "Large pools").
ATTACH_WORKERS = 128
SLOW_PASS_S = 2.0
IDLE_GRACE_ON_DELETED_NODE = "a device on a deleted node waits for the idle grace"  # without the node list
NODES_READ_S = 1.0  # the node list is read at most this often (only while a device is attached)


class PassTimer:
    """Seconds per phase of one pass, logged with a slow pass: where the time of a thousand claims goes."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.laps: list[tuple[str, float]] = []

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.laps.append((phase, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return ", ".join(f"{phase} {seconds:.1f}s" for phase, seconds in self.laps)


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        kube: Kube,
        fabric: FabricClient,
        metrics: Metrics,
        *,
        poll_s: float = 1.0,
        workers: int = ATTACH_WORKERS,
        role: Role = Role.ALL,
    ) -> None:
        self.settings = settings
        self.role = role  # decides the whole plan, executes its share (roles.py)
        self.kube = kube
        self.fabric = fabric
        self.metrics = metrics
        self.poll_s = poll_s
        self.caches: Caches | None = None
        self.statelog = StateLog()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fabric-op")
        # Condition writes of different claims are independent: written side by side, the pass waits for all.
        self._writers = ThreadPoolExecutor(max_workers=CONDITION_WRITERS, thread_name_prefix="condition")
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._inflight: dict[str, str] = {}
        self._failures: dict[str, Failure] = {}
        self._errored: dict[str, str] = {}  # --broken-report-on-fabric-error only
        self._idle: dict[str, float] = {}
        self._rescheduled: dict[str, int] = {}
        self._assigned: dict[AssignmentKey, str] = {}  # counted: written to claims, maybe not in the cache yet
        self._forgotten: frozenset[tuple[str, str]] | None = None  # --broken-forget-on-restart, from the first pass
        self._problem = ""
        # Read only while a device is attached; None where refused (every node then counts as existing).
        self._node_names = NodeLister(kube.node_names, IDLE_GRACE_ON_DELETED_NODE, NODES_READ_S)
        self.timer = PassTimer()  # the last pass's phases
        self._claim_objects: dict[str, dict[str, Any]] = {}  # namespace/name -> the claim as the last pass read it
        self._wedged = ""  # --broken-abort-on-other-driver: the claim that stopped every pass since

    def wake(self) -> None:
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        assert self.caches is not None
        for cache in self.caches.all():
            while not cache.synced.wait(0.5):
                if stop.is_set():
                    return
        log.info(
            "caches synced; reconciling (driver %s, mode %s, fabric entries %s, role %s)",
            self.settings.driver,
            self.settings.mode,
            self.settings.fabric_entries,
            self.role,
        )
        while not stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            began = time.monotonic()
            try:
                self.reconcile_once()
                self._report_problem("")
                if (took := time.monotonic() - began) > SLOW_PASS_S:  # every timer of the stack waits on passes
                    log.info("slow reconcile pass: %.1fs (%s)", took, self.timer)
            except (FabricUnavailable, ForeignClaim) as exc:
                self._report_problem(str(exc))
            except ApiException as exc:
                self._report_problem(f"kubernetes API: {exc.status} {exc.reason}")
            except (HTTPError, OSError) as exc:
                self._report_problem(f"kubernetes API unreachable: {exc}")
            stop.wait(0.02)  # coalesce bursts of watch events into one pass
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._writers.shutdown(wait=False, cancel_futures=True)

    def _report_problem(self, problem: str) -> None:
        if problem != self._problem:
            if problem:
                log.warning("reconcile failed, keeping everything as it is: %s", problem)
            else:
                log.info("reconcile works again")
        self._problem = problem

    # --- one pass -------------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        assert self.caches is not None
        devices = self.fabric.devices()
        allocated = [o for o in self.caches.claims.items() if (o.get("status") or {}).get("allocation")]
        if self.settings.broken_abort_on_other_driver:  # broken on purpose: see ForeignClaim
            self._wedged = self._wedged or foreign_claim(allocated, self.settings.driver)
            if self._wedged:
                raise ForeignClaim(self._wedged)
        if self.settings.broken_abort_pass_on_other_driver and (
            found := foreign_claim(allocated, self.settings.driver, False)
        ):
            raise ForeignClaim(found)  # broken on purpose: this pass only
        claims = tuple(Claim.from_api(o) for o in allocated)
        # The objects the decisions are made from: a condition write replaces one with its resourceVersion.
        self._claim_objects = {f"{c.namespace}/{c.name}": o for c, o in zip(claims, allocated, strict=True)}
        copies = tuple(node_copies(self.caches.slices.items(), self.settings.driver))
        taints = tuple(t for o in self.caches.taints.items() if (t := TaintRule.from_api(o)))
        nodes = self._node_names() if any(d.state == "attached" for d in devices) else None
        return Snapshot(tuple(devices), claims, copies, taints, nodes)

    def reconcile_once(self) -> Plan:
        now = time.time()
        timer = self.timer = PassTimer()
        snap = self.snapshot()
        timer.lap(f"snapshot ({len(snap.claims)} claims)")
        assert self.caches is not None
        uids = {o["metadata"]["uid"] for o in self.caches.claims.items()}
        first = self._forgotten is None
        if self._forgotten is None:
            self._forgotten = self._found_at_start(snap)
        with self._lock:
            self._rescheduled = {uid: n for uid, n in self._rescheduled.items() if uid in uids}
            live = {assignment_key(c, r) for c in snap.claims for r in c.results}
            self._assigned = {key: uuid for key, uuid in self._assigned.items() if key in live}
            memory = Memory(
                dict(self._inflight),
                dict(self._failures),
                dict(self._idle),
                dict(self._rescheduled),
                self._forgotten,
                dict(self._assigned),
                errored=dict(self._errored),
                fresh=first,
            )
        plan = decide(self.settings, snap, memory, now)
        timer.lap("decide")
        if first and self.settings.broken_detach_all_on_restart:  # broken on purpose: in use or not
            plan.detaches += [Detach(d.uuid, d.node, recheck=False) for d in snap.devices if d.state == "attached"]
        if first:
            self._broken_at_start(plan, snap)
        with self._lock:
            self._idle = plan.idle_since
        self.statelog.update(plan.states)
        self.metrics.reconciles.inc()
        for state in ("free", "attaching", "attached", "detaching"):
            self.metrics.devices.labels(state).set(sum(d.state == state for d in snap.devices))
        timer.lap("state log")
        self._execute(share(plan, self.role), snap, now, timer)
        return plan

    def _found_at_start(self, snap: Snapshot) -> frozenset[tuple[str, str]]:
        """The broken modes that forget work found at the first pass, as (device uuid, claim uid) pairs never served
        (claim uid "": an idle device never detached):
        --broken-forget-on-restart: the attaches in flight or done for an allocated claim;
        --broken-forget-unsent-on-restart: what was decided but not yet sent to the fabric (an allocated claim whose
        device is still free: its attach; an attached device nobody holds: its detach);
        --broken-forget-move-on-restart: a claim whose device is attached to, or detaching from, another node;
        --broken-reoffer-failed-on-restart: the failures the quarantine rules found record (forgotten_failure)."""
        s = self.settings
        state = {d.uuid: d for d in snap.devices}
        held = holdings(s, snap)
        found: set[tuple[str, str]] = set()
        for uuid, holders in held.items():
            d = state[uuid]
            for h in holders:
                if not h.via_fabric:
                    continue
                if s.broken_forget_on_restart and d.state in ("attaching", "attached"):
                    found.add((uuid, h.claim.uid))
                pending = not h.ready() and not h.failed()
                if s.broken_forget_unsent_on_restart and pending and d.state == "free":
                    found.add((uuid, h.claim.uid))
                elsewhere = d.state in ("attached", "detaching") and d.node != h.claim.node
                if s.broken_forget_move_on_restart and pending and elsewhere:
                    found.add((uuid, h.claim.uid))
        if s.broken_forget_unsent_on_restart:
            found |= {(d.uuid, "") for d in snap.devices if d.state == "attached" and not held.get(d.uuid)}
        if s.broken_forget_detach_on_restart:  # a detach begun: its guard is there, nobody holds the device
            guarded = {t.uuid for t in snap.taints if t.purpose is Purpose.DETACH}
            found |= {(d.uuid, "detach") for d in snap.devices if d.uuid in guarded and not held.get(d.uuid)}
        if s.broken_reoffer_failed_on_restart:  # these rules, not a later failure of the same device
            found |= {(t.uuid, forgotten_failure(t)) for t in snap.taints if t.purpose is Purpose.QUARANTINE}
        return frozenset(found)

    def _broken_at_start(self, plan: Plan, snap: Snapshot) -> None:
        """The broken modes that act once, at the first pass (selftests only): --broken-reoffer-failed-on-restart
        deletes the quarantine rules it finds (the failures they record are forgotten from then on: _found_at_start);
        --broken-attachment-records attaches again the free devices its stale record lists."""
        s = self.settings
        if s.broken_reoffer_failed_on_restart:
            plan.delete_taints += [t.name for t in snap.taints if t.purpose is Purpose.QUARANTINE]
            plan.conditions = [w for w in plan.conditions if w.type != s.attach_failed]
        if s.broken_attachment_records:
            held = holdings(s, snap)
            records = attachment_records(s.broken_attachment_records)
            for d in snap.devices:
                if d.state == "free" and d.uuid in records and not held.get(d.uuid):
                    plan.attaches.append(Attach(d.uuid, records[d.uuid], "a stale attachment record"))

    def _execute(self, plan: Plan, snap: Snapshot, now: float, timer: PassTimer) -> None:
        rules = {t.name for t in snap.taints}
        for name in plan.delete_taints:
            if self._try(f"delete taint rule {name}", self.kube.delete_taint, name)[0]:
                rules.discard(name)
        for taint in plan.create_taints:
            name = self.settings.taint_rule_name(taint.purpose, taint.uuid)
            if self._try(f"create taint rule {name}", self.kube.create_taint, taint, now)[0]:
                rules.add(name)
                if taint.purpose is Purpose.QUARANTINE:
                    with self._lock:  # recorded in the cluster now; the rule carries reason and message
                        self._failures.pop(taint.uuid, None)
                    self.statelog.event(f"device {taint.device}", f"quarantined: {taint.reason}")
        assert self.caches is not None
        published: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in self.caches.slices.items():
            if not s["spec"].get("nodeName"):
                published[s["spec"]["pool"]["name"]].append(s)
        for fabric, devices in sorted(plan.pools.items()):
            cached = published.get(fabric, [])
            _, generation = self._try(f"publish pool {fabric}", self.kube.sync_pool, fabric, devices, cached)
            if generation:
                shown = brief([d.name for d in devices])
                log.info("pool %s: generation %d, %d devices %s", fabric, generation, len(devices), shown)
        timer.lap("pools")
        # Fabric operations go to their workers first: they take the fabric's time, and with many claims the
        # condition writes below take the apiserver's; neither waits for the other.
        names = {d.uuid: d for d in snap.devices}
        for attach in plan.attaches:
            if attach.needs_hold and self.settings.taint_rule_name(Purpose.HOLD, attach.uuid) not in rules:
                continue  # the hold rule must exist before the device (and so its node-local copy) shows up
            self._submit("attach", attach, names[attach.uuid])
        for detach in plan.detaches:
            if detach.recheck and self._held_now(detach.uuid, snap):
                continue
            self._submit("detach", detach, names[detach.uuid])
        timer.lap("fabric-ops")
        by_claim: dict[str, list[ConditionWrite | Assignment]] = defaultdict(list)
        for write in [*plan.assignments, *plan.conditions]:  # one claim's writes in order: side by side they
            by_claim[write.claim.key].append(write)  # would conflict (409)
        list(self._writers.map(lambda writes: [self._write(w, now) for w in writes], by_claim.values()))
        timer.lap(f"writes ({sum(map(len, by_claim.values()))})")

    def _write(self, write: ConditionWrite | Assignment, now: float) -> None:
        if isinstance(write, ConditionWrite):
            self._write_condition(write, now)
            return
        label = f"claim {write.claim.key} {write.result.pool}/{write.result.device}"
        ok, uuid = self._try(f"{label}: assign {write.uuid}", self.kube.write_assignment, write)
        if ok and uuid:
            with self._lock:
                self._assigned[assignment_key(write.claim, write.result)] = uuid
            self.statelog.event(label, f"assigned physical device {uuid}")
            self.wake()  # the attach follows in the next pass

    def _write_condition(self, write: ConditionWrite, now: float) -> None:
        label = f"claim {write.claim.key} {write.result.pool}/{write.result.device}"
        cached = self._claim_objects.get(write.claim.key)
        ok, result = self._try(f"{label}: set {write.type}", self.kube.write_condition, write, now, cached)
        if not ok or result is None:
            return
        self.metrics.condition_writes.labels(write.type, result).inc()
        if self.settings.broken_offer_failed_device and write.type == self.settings.attach_failed:
            with self._lock:  # no quarantine rule records it: once told, the failure is forgotten
                self._failures.pop(write.uuid, None)
        if result == "written":
            self.statelog.event(label, f"{write.type}=True ({write.reason}: {write.message})")
            if write.type == self.settings.reschedule:
                with self._lock:
                    self._rescheduled[write.claim.uid] = self._rescheduled.get(write.claim.uid, 0) + 1
            if write.claim.allocated_at:
                allocated = datetime.fromisoformat(write.claim.allocated_at.replace("Z", "+00:00")).timestamp()
                self.metrics.to_condition.labels(write.type).observe(max(0.0, now - allocated))
        elif result == "stale":
            self.statelog.event(label, f"not setting {write.type}: the allocation changed meanwhile")

    def _held_now(self, uuid: str, snap: Snapshot) -> bool:
        """Fresh claims, not the cache: an allocation may have landed while the detach guard settled."""
        fresh = tuple(Claim.from_api(o) for o in self.kube.list_claims() if (o.get("status") or {}).get("allocation"))
        with self._lock:
            memory = Memory(assigned=dict(self._assigned))
        held = holdings(self.settings, Snapshot(snap.devices, fresh, snap.copies, snap.taints), memory).get(uuid)
        return bool(held)

    def _try(self, what: str, fn: Callable[..., T], *args: Any) -> tuple[bool, T | None]:
        """Run one write; a refused write is logged and retried by a later pass, the others still run."""
        try:
            return True, fn(*args)
        except ApiException as exc:
            log.warning("%s: %s %s", what, exc.status, exc.reason)
        except (HTTPError, OSError) as exc:
            log.warning("%s: %s", what, exc)
        self.wake()
        return False, None

    # --- fabric operations ----------------------------------------------------------------------------------

    def _submit(self, kind: str, op: Attach | Detach, device: FabricDevice) -> None:
        with self._lock:
            if op.uuid in self._inflight:
                return
            self._inflight[op.uuid] = kind
        self._pool.submit(self._operate, kind, op, device)

    def _operate(self, kind: str, op: Attach | Detach, device: FabricDevice) -> None:
        started = time.monotonic()
        try:
            if isinstance(op, Attach):
                outcome = self.fabric.attach(op.uuid, op.node)
            else:
                outcome = self.fabric.detach(op.uuid, op.node)
        finally:
            elapsed = time.monotonic() - started
            with self._lock:
                self._inflight.pop(op.uuid, None)
        label = "success" if outcome.ok else ("failed" if outcome.failed else "error")
        histogram = self.metrics.attach if kind == "attach" else self.metrics.detach
        histogram.labels(label).observe(elapsed)
        node = op.node or "?"
        if outcome.ok:
            what = f"{kind} {'to' if kind == 'attach' else 'from'} {node} done in {elapsed:.2f}s"
        else:
            what = f"{kind} {node} {label} after {elapsed:.2f}s: {outcome.error} {outcome.reason} {outcome.message}"
        if isinstance(op, Attach):
            what += f" (for {op.claim})"
        self.statelog.event(f"device {device.name}", what)
        if kind == "attach" and outcome.ok and self.settings.broken_attachment_records:
            with self._lock:  # broken on purpose: recorded, never removed
                record_attachment(self.settings.broken_attachment_records, op.uuid, op.node)
        if kind == "attach" and outcome.failed:
            with self._lock:
                self._failures[op.uuid] = Failure(outcome.reason, outcome.message or outcome.error, time.time())
        elif kind == "attach" and not outcome.ok and self.settings.broken_report_on_fabric_error:
            with self._lock:
                self._errored[op.uuid] = op.node
        if outcome.ok or outcome.failed:
            self.wake()  # the next step follows at once; a fabric out of reach is tried again at the next poll
