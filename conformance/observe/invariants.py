"""Invariants judged for the whole of a run from the run-wide record (recorder.py), not only checked at the end of
a scenario.

- IMP-6: each physical device is offered free by at most one device entry across all slices, and no two live
  allocations hold the same physical device through two entries. One entry in two claims is "allocated-twice": the
  scheduler's fault (SCH-9), which leaves an implementation scenario unjudged rather than failed. "Free" = not
  allocated and not tainted NoSchedule/NoExecute (in the device or by a DeviceTaintRule). "Live" = no failure
  condition True: a claim whose binding failed never binds, and the scheduler is about to clear it (seen with the
  reference controller's reschedule-to-local mode).
- SCH-3: no pod of the run is bound before all binding conditions of its claims are True. Ordered by
  resourceVersion (the etcd revision), so the verdict does not depend on which watch stream delivered first; judged
  once the claim stream has delivered up to the binding's revision (Recorder.high_water).

"Held twice" and "bound early" are exact. "Offered" combines three streams (slices, claims, taint rules), so a
violation counts only when it persists for PERSIST_S: a free entry seen for the few milliseconds between a
claim's allocation and the slice update is stream skew, not an offer anybody could allocate from.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import Cancelled, WaitTimeout, wait_for
from conformance.observe.attachments import stamp
from conformance.observe.recorder import Record, Recorder
from conformance.observe.slices import allocation_results, device_identity, reaches, tainted_by_rule
from conformance.observe.views import CATCH_UP_S, binding_state, claims_current

PERSIST_S = 1.0
SCHEDULER_FAULT = "allocated-twice"  # one device entry allocated to two live claims: the allocator's doing
EVALUATE_EVERY_S = 0.2
RECORD_LAG_S = 5.0  # how far one watch stream of the record may trail another


@dataclass(frozen=True)
class Violation:
    at: float  # time.time()
    what: str  # held-twice / allocated-twice / offered-twice / offered-while-held / bound-early
    identity: str  # physical device, or the pod for bound-early
    objects: tuple[str, ...]  # claims, slices or pod involved
    namespaces: frozenset[str]

    def __str__(self) -> str:
        return f"{stamp(self.at)} {self.what} {self.identity}: {', '.join(self.objects)}"


def newest_generation(slices: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slices the scheduler reads: of each pool only those of its newest generation (a pool being rewritten
    shows two generations for a moment, and a device moving between its slices is not offered twice)."""
    slices = list(slices)
    newest: dict[str, int] = {}
    for s in slices:
        pool = s["spec"]["pool"]
        newest[pool["name"]] = max(newest.get(pool["name"], 0), int(pool.get("generation", 0)))
    return [s for s in slices if int(s["spec"]["pool"].get("generation", 0)) == newest[s["spec"]["pool"]["name"]]]


def _name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


@dataclass
class _Bind:
    pod: str
    namespace: str
    revision: int
    claims: list[str]
    at: float


@dataclass
class InvariantWatcher:
    """Follows the record's claims, slices, taint rules and the run's pods; keeps every violation with its moment."""

    record: Recorder
    driver: str
    attribute: str  # the profile's identityAttribute
    # Count-based fabric entries (fabricEntries: counted): the model attribute; the offered entries must never
    # exceed the free counts of the record's fabric probe.
    model_attribute: str | None = None
    # How long offered entries may exceed the fabric's free count before it counts: the scheduler clears a
    # rescheduled entry before the implementation can rewrite its pool, so a pool lags the fabric for as long as
    # the implementation takes to react (session/scenarios.py: the profile's attachSeconds).
    counted_persist_s: float = PERSIST_S
    violations: list[Violation] = field(default_factory=list)
    evaluations: int = 0
    _identity: dict[tuple[str, str], str] = field(default_factory=dict)  # (pool, device) -> identity, cumulative
    _node_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (pool, device) -> nodeName or "", cumulative
    _claim_history: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # claim -> [(revision, state)]
    _binds: list[_Bind] = field(default_factory=list)
    _claims_through: int = 0  # the claim stream's high water as of the records taken in (Recorder.high_water)
    _bound: set[str] = field(default_factory=set)
    _suspects: dict[tuple[str, str], float] = field(default_factory=dict)  # (what, identity) -> first seen
    _reported: set[tuple[str, str, tuple[str, ...]]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _seq: int = 0  # how far the record has been followed
    _following: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> InvariantWatcher:
        threading.Thread(target=self._loop, daemon=True, name="invariants").start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._settle(None)

    # --- following the record -------------------------------------------------------------------------------

    def follow(self) -> None:
        """Take in what the record gained since the last call."""
        with self._following:
            through = self.record.high_water("claim")  # first: every claim record up to it is in `new`
            new = self.record.after_seq(self._seq)
            self._seq += len(new)
            self._take(new)
            self._claims_through = max(self._claims_through, through)

    def _take(self, new: list[Record]) -> None:
        for r in new:
            if r.kind == "claim":
                self._on_claim(r)
            elif r.kind == "slice" and r.type != "DELETED":
                self._on_slice(r.obj)
            elif r.kind == "pod":
                self._on_pod(r)

    def _on_claim(self, r: Record) -> None:
        name, state = f"{r.namespace}/{r.name}", "deleted" if r.type == "DELETED" else binding_state(r.obj)
        with self._lock:
            history = self._claim_history.setdefault(name, [])
            if not history or history[-1][1] != state:
                history.append((r.revision or 0, state))

    def _on_slice(self, summary: dict[str, Any]) -> None:
        """Every copy ever published keeps its identity and node: a device a pool has dropped since (attached,
        failed, detaching) is still recognised in the allocations that name it."""
        if summary.get("driver") != self.driver:
            return
        with self._lock:
            for d in summary["devices"]:
                self._node_of[(summary["pool"], d["name"])] = summary.get("nodeName") or ""
                if "identity" in d:
                    self._identity[(summary["pool"], d["name"])] = d["identity"]

    def _remember(self, slice_: dict[str, Any]) -> None:
        spec = slice_["spec"]
        if spec.get("driver") != self.driver:
            return
        pool = spec["pool"]["name"]
        with self._lock:
            for d in spec.get("devices") or []:
                self._node_of[(pool, d["name"])] = spec.get("nodeName") or ""
                if ident := device_identity(d, self.attribute, self.driver):
                    self._identity[(pool, d["name"])] = ident

    def published(self, devices: Iterable[tuple[str, str]], timeout: float = RECORD_LAG_S) -> None:
        """Wait (at most `timeout`) until every copy in `devices` has been seen in a slice. An allocation names a copy
        the scheduler saw published, but the record's claim and slice streams arrive independently: the claim's
        event can come first. A copy never published is left unknown after the timeout, for the check to say so."""
        wanted = set(devices)

        def unseen() -> set[tuple[str, str]]:
            self.follow()
            with self._lock:
                return wanted - self._node_of.keys()

        _poll(unseen, timeout, "every allocated copy seen in a slice of the record")

    def identity_of(self, pool: str, device: str) -> str | None:
        """The physical identity of a published copy, as last seen in any slice of the run (None: never shown)."""
        self.follow()  # all the record holds, not what the watcher's last round took in
        with self._lock:
            return self._identity.get((pool, device))

    def node_of(self, pool: str, device: str) -> str | None:
        """The node of the node-local slice that published this copy; "" for a pool without nodeName."""
        self.follow()
        with self._lock:
            return self._node_of.get((pool, device))

    def live_nodes(self) -> list[NodeSpec]:
        """Nodes a pod can be scheduled to right now, with their current labels (an implementation may label
        nodes at run time): Ready, schedulable, without NoSchedule/NoExecute taints."""
        out = []
        for node in self.record.live("node"):
            spec, status = node.get("spec") or {}, node.get("status") or {}
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
            tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])
            if ready and not tainted and not spec.get("unschedulable"):
                out.append(NodeSpec(node["metadata"]["name"], dict(node["metadata"].get("labels") or {})))
        return sorted(out, key=lambda n: n.name)

    def driver_slices(self) -> list[dict[str, Any]]:
        """The driver's slices as the scheduler reads them now (each pool's newest generation)."""
        return newest_generation(s for s in self.record.live("slice") if s["spec"]["driver"] == self.driver)

    def _on_pod(self, r: Record) -> None:
        pod, name = r.obj, f"{r.namespace}/{r.name}"
        node = (pod.get("spec") or {}).get("nodeName")
        if r.type == "DELETED" or not node or name in self._bound:
            return
        meta = pod["metadata"]
        # Claims from templates are named in the status; shared claims directly in the spec.
        named = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        named += (pod.get("spec") or {}).get("resourceClaims") or []
        claims = sorted({f"{meta['namespace']}/{s['resourceClaimName']}" for s in named if s.get("resourceClaimName")})
        with self._lock:
            self._bound.add(name)
            self._binds.append(_Bind(name, meta["namespace"], r.revision or 0, claims, r.at))

    # --- evaluation -----------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(EVALUATE_EVERY_S):
            self.follow()
            self._check_devices()
            self._check_binds(final=False)
            self.evaluations += 1

    def _record(self, what: str, identity: str, objects: list[str], persisted: bool = True) -> None:
        key = (what, identity, tuple(sorted(objects)))
        if not persisted or key in self._reported:
            return
        self._reported.add(key)
        namespaces = frozenset(o.split("/")[0] for o in objects if "/" in o)
        self.violations.append(Violation(time.time(), what, identity, tuple(sorted(objects)), namespaces))

    def _check_devices(self) -> None:
        slices = self.driver_slices()
        for s in slices:  # the events recorded them already; a cache filled otherwise (tests) is read here
            self._remember(s)
        entries: dict[str, dict[tuple[str, str], list[str]]] = {}  # identity -> entry -> live claims holding it
        allocated: set[tuple[str, str]] = set()
        for c in self.record.live("claim"):
            for r in allocation_results(c):
                if r["driver"] != self.driver:
                    continue
                allocated.add((r["pool"], r["device"]))
                ident = self.identity_of(r["pool"], r["device"])
                if ident and binding_state(c) != "failed":
                    entries.setdefault(ident, {}).setdefault((r["pool"], r["device"]), []).append(_name(c))
        held = {ident: [c for claims in by_entry.values() for c in claims] for ident, by_entry in entries.items()}
        offered = self._offered(slices, allocated)
        now = time.monotonic()
        current = set()
        for ident, objects in self._above_free(slices, allocated).items():
            current.add(("offered-above-free", ident))
            first = self._suspects.setdefault(("offered-above-free", ident), now)
            self._record("offered-above-free", ident, objects, persisted=now - first >= self.counted_persist_s)
        for ident, by_entry in entries.items():
            # One entry in two claims: only the allocator writes allocations, so that is the scheduler's (SCH-9,
            # allocations.py), not the implementation's; two entries of one device held at once are the latter's.
            for holders in by_entry.values():
                if len(holders) > 1:
                    self._record(SCHEDULER_FAULT, ident, holders)
            if len(by_entry) > 1:
                self._record("held-twice", ident, held[ident])
        for what, found in (
            ("offered-twice", {i: e for i, e in offered.items() if len(e) > 1}),
            ("offered-while-held", {i: offered[i] + held[i] for i in offered if i in held}),
        ):
            for ident, objects in found.items():
                current.add((what, ident))
                first = self._suspects.setdefault((what, ident), now)
                self._record(what, ident, objects, persisted=now - first >= PERSIST_S)
        self._suspects = {k: v for k, v in self._suspects.items() if k in current}

    def _offered(self, slices: list[dict[str, Any]], allocated: set[tuple[str, str]]) -> dict[str, list[str]]:
        """identity -> "slice:device" of every free entry (not allocated, not tainted NoSchedule/NoExecute)."""
        rules = self.record.live("taintrule")
        offered: dict[str, list[str]] = {}
        for s in slices:
            pool = s["spec"]["pool"]["name"]
            for d in s["spec"].get("devices") or []:
                ident = self.identity_of(pool, d["name"])
                if (
                    not ident
                    or (pool, d["name"]) in allocated
                    or d.get("taints")
                    or tainted_by_rule(rules, self.driver, pool, d["name"])
                ):
                    continue
                offered.setdefault(ident, []).append(f"{s['metadata']['name']}:{d['name']}")
        return offered

    def counted_offered(
        self, slices: list[dict[str, Any]] | None = None, allocated: set[tuple[str, str]] | None = None
    ) -> dict[tuple[str, str], list[str]]:
        """(pool, model) -> "slice:device" of every count-based entry offered free (not allocated, not tainted)."""
        if not self.model_attribute:
            return {}
        slices = self.driver_slices() if slices is None else slices
        if allocated is None:
            allocated = {(r["pool"], r["device"]) for c in self.record.live("claim") for r in allocation_results(c)}
        rules = self.record.live("taintrule")
        out: dict[tuple[str, str], list[str]] = {}
        for s in slices:
            pool = s["spec"]["pool"]["name"]
            if s["spec"].get("nodeName"):
                continue
            for d in s["spec"].get("devices") or []:
                model = device_identity(d, self.model_attribute, self.driver)
                if not model or device_identity(d, self.attribute, self.driver) or not d.get("bindingConditions"):
                    continue
                if (pool, d["name"]) in allocated or d.get("taints"):
                    continue
                if tainted_by_rule(rules, self.driver, pool, d["name"]):
                    continue
                out.setdefault((pool, model), []).append(f"{s['metadata']['name']}:{d['name']}")
        return out

    def fabric_free(self, pool_nodes: frozenset[str], model: str) -> int | None:
        """The probe's newest free count of `model` on the fabric whose nodes are those a pool reaches; None when
        the probe reports no such count. A fabric may reach machines that are no (schedulable) node of the cluster
        (a spare machine, a node added and deleted by IMP-16): only its live nodes are compared, as pool_nodes has."""
        counts = self.fabric_counts(pool_nodes, model)
        return counts[0] if counts else None

    def fabric_counts(self, pool_nodes: frozenset[str], model: str) -> tuple[int, int] | None:
        """(free, total) of fabric_free's count; None as there."""
        latest = self.record.latest()
        if not latest:
            return None
        live = {n.name for n in self.live_nodes()}
        counts = [
            f for f in latest[2] if f.get("model") == model and frozenset(f.get("nodes") or ()) & live == pool_nodes
        ]
        return (int(counts[0]["free"]), int(counts[0].get("total", counts[0]["free"]))) if len(counts) == 1 else None

    def counted_complete(self, pool: str, model: str) -> tuple[bool, str]:
        """Count-based pools: whether the pool offers every free device of `model` its fabric has (the probe's free
        count), and what was compared. A device whose last attach failed (fabric truth: attaching, then free, never
        attached) may be withheld: IMP-4 forbids offering it again, for as long as the stack deems it failed, so
        the pool may be short by that many entries. Entries carry no identity, so this allowance cannot tell which
        free device is withheld; without a failed device on the fabric there is none."""
        nodes = self.pool_nodes(pool)
        offered = self.counted_offered().get((pool, model), [])
        # An allocated entry stands for a free device the pool no longer offers until the stack has attached it (its
        # assignment waits for the attach): the pool may be short by as many.
        allocated = self.counted_offered(allocated=set()).get((pool, model), [])
        pending = len(allocated) - len(offered)
        free = self.fabric_free(nodes, model)
        failed = sorted(
            d for d, (node, m) in self.record.failed_attaches().items() if node in nodes and m in (None, model)
        )
        said = f"{pool}/{model}: {len(offered)} entries offered, {free} free in the fabric"
        if failed:
            said += f" ({len(failed)} of them after a failed attach, may be withheld: {failed[:3]})"
        if pending:
            said += f", {pending} entries allocated (their devices perhaps not attached yet)"
        return free is not None and len(offered) + pending >= free - len(failed), said

    def pool_nodes(self, pool: str) -> frozenset[str]:
        """The live nodes a pool's slices reach."""
        nodes = self.live_nodes()
        reached: set[str] = set()
        for s in self.driver_slices():
            if s["spec"]["pool"]["name"] == pool:
                reached |= {n.name for n in nodes if reaches(s, n.name, n.labels)}
        return frozenset(reached)

    def _above_free(self, slices: list[dict[str, Any]], allocated: set[tuple[str, str]]) -> dict[str, list[str]]:
        """Count-based pools: "pool/model offered N > free F" for every pool offering more entries than the fabric
        it reaches has free devices of that model (the probe's free counts; pools mapped to fabrics by the nodes
        they reach). Offered = listed, not allocated, not tainted."""
        out: dict[str, list[str]] = {}
        for (pool, model), entries in self.counted_offered(slices, allocated).items():
            free = self.fabric_free(self.pool_nodes(pool), model)
            if free is not None and len(entries) > free:
                out[f"{pool}/{model}"] = [f"offered {len(entries)} > free {free} in the fabric", *entries[:3]]
        return out

    def copies_on(self, node: str) -> list[str]:
        """Node-local copies of the driver on `node` right now that a claim holds or the scheduler could allocate
        (not tainted): an attached device left there, free or still held by a claim that is going away. Held ones
        count because such a claim may be deallocated a moment later, and its copy is then free for any pod."""
        slices = [s for s in self.driver_slices() if s["spec"].get("nodeName") == node]
        return [e for entries in self._offered(slices, set()).values() for e in entries]

    def in_offer(self, identity: str, node: str) -> list[str]:
        """The entries of this physical device reaching `node` that the scheduler could allocate were no claim holding
        them (newest generation, untainted): a failed device still held by its own claim is out of offer once none is
        left (IMP-8's failure path; removed, tainted, or its selector narrowed away from the node)."""
        labels = next(
            (
                dict(n["metadata"].get("labels") or {})
                for n in self.record.live("node")
                if n["metadata"]["name"] == node
            ),
            {},
        )
        slices = [s for s in self.driver_slices() if reaches(s, node, labels)]
        return self._offered(slices, set()).get(identity, [])

    def free_entries(self, identity: str, node: str | None = None) -> list[str]:
        """The entries that offer this physical device free right now, as the watcher sees the cluster (`node`: only
        the node-local slices of that node)."""
        slices = [s for s in self.driver_slices() if node is None or s["spec"].get("nodeName") == node]
        allocated = {
            (r["pool"], r["device"])
            for c in self.record.live("claim")
            for r in allocation_results(c)
            if r["driver"] == self.driver
        }
        return self._offered(slices, allocated).get(identity, [])

    def _check_binds(
        self, final: bool, namespaces: set[str] | None = None, current: frozenset[str] = frozenset()
    ) -> None:
        """Judge the binds the claim stream has caught up with, or whose namespace's claims are all taken in
        (`current`); `final`: also the others (of `namespaces`)."""
        with self._lock:
            pending = []
            for bind in self._binds:
                last = final and (namespaces is None or bind.namespace in namespaces)
                verdict = self._bound_early(bind, last, bind.namespace in current)
                if verdict is None:
                    pending.append(bind)
                elif verdict:
                    self.violations.append(
                        Violation(bind.at, "bound-early", bind.pod, (bind.pod, *verdict), frozenset({bind.namespace}))
                    )
            self._binds = pending

    def _bound_early(self, bind: _Bind, final: bool, current: bool = False) -> list[str] | None:
        """None: cannot tell yet; []: fine; else the claims that were not ready at the binding's revision. Told once the
        claim stream has delivered up to the binding's revision (a claim's ready state written just before the binding
        may still be in flight on it, however long it lags), or `final`: with what it delivered, and then said."""
        through = self._claims_through
        behind = through < bind.revision and not current
        if behind and not final:
            return None
        lag = f"; the claim stream had delivered only up to revision {through}" if behind else ""
        early = []
        for claim in bind.claims:
            at_bind = [state for rev, state in self._claim_history.get(claim, []) if rev <= bind.revision]
            state = at_bind[-1] if at_bind else "unknown"
            if state not in ("none", "ready"):
                early.append(f"{claim} was {state} at the binding (revision {bind.revision}{lag})")
        return early

    def _settle(self, namespaces: set[str] | None) -> None:
        """Before a scenario's verdict (namespaces None: the run's end): its binds still waiting for the claim stream
        are judged once it has caught up, else CATCH_UP_S after their delivery with what it delivered (a cluster that
        writes no claim after a binding never moves the stream past it: left unjudged, a real bound-early passes)."""

        def waiting() -> bool:
            # Asked before the record is taken in: a namespace whose claims the record held as the apiserver listed
            # them has nothing in flight once follow() has taken the record in (views.claims_current).
            with self._lock:
                behind = {b.namespace for b in self._binds if namespaces is None or b.namespace in namespaces}
            current = frozenset(ns for ns in behind if claims_current(self.record, ns))
            self.follow()
            self._check_binds(final=False, current=current)
            with self._lock:
                mine = [b for b in self._binds if namespaces is None or b.namespace in namespaces]
                return any(time.time() < b.at + CATCH_UP_S for b in mine)

        # interrupted: judged with what was delivered
        _poll(waiting, CATCH_UP_S, "the claim stream to deliver up to the scenario's bindings", Cancelled)
        self._check_binds(final=True, namespaces=namespaces)

    def since(self, start: float, namespaces: set[str], identities: set[str]) -> list[Violation]:
        """Violations from `start` on that involve these namespaces or physical devices (their bindings judged)."""
        self._settle(namespaces)
        return [
            v
            for v in list(self.violations)
            if v.at >= start and (v.namespaces & namespaces or v.identity in identities)
        ]


def _poll(left: Callable[[], Any], timeout: float, expected: str, *quiet: type[BaseException]) -> None:
    """Poll `left` every EVALUATE_EVERY_S until it returns nothing, at most `timeout`; then go on with what is."""
    with contextlib.suppress(WaitTimeout, *quiet):
        wait_for(
            left,
            lambda rest: not rest,
            timeout=timeout,
            expected=expected,
            interval=EVALUATE_EVERY_S,
            max_interval=EVALUATE_EVERY_S,
        )
