"""The run-wide record, the one observer of the run: every change of claims, the run's pods, slices, nodes,
events and taint rules, each with its resourceVersion (the etcd revision), plus the fabric probe sampled every
PROBE_PERIOD_S where the profile has one, each answer with the time its request was sent and the time it came back.

Scenarios (views.History), the invariants (invariants.py), the attachment checks (attachments.py) and the reports
(report/timeline.py, report/gather.py) all read it: nothing else watches the API or polls the probe.

Claims and pods are kept whole (a timeline needs their conditions); slices, nodes and events as summaries
(summaries.py); a node's heartbeat is not a change worth recording, only a changed summary is. The current objects
of every kind are kept whole too (`live`), for the invariants and the failure snapshots.
"""

from __future__ import annotations

import bisect
import itertools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.objects import RUN_LABEL
from conformance.implementation import endpoints
from conformance.observe.summaries import event_summary, node_summary, slice_summary
from conformance.observe.watchcache import WatchCache

PROBE_PERIOD_S = 0.1  # the fabric probe's sampling period (the issue asks for at most 0.2 s)
PROBE_TIMEOUT_S = 2.0
PROBE_IN_FLIGHT = 3  # requests at once: a slow answer does not stretch the period (a tick with all busy is a gap)
MAX_RECORDS = 400_000  # beyond this the record keeps counting but stops storing (said in its stats)
States = dict[str, tuple[str, str]]  # physical identity -> (node, state) of every device the fabric has not free


def _shared(states: States, before: States) -> States:
    """`states` with every entry equal to one of `before` taken from it (its name and its value): the entries of a
    probe answer that did not change cost one dict slot each, not a copy (1000 attaches held while the pods arrive:
    each answer differs from the one before by one entry, and the record kept them all whole: memory grew with
    attachments x changes, measured 2026-12-07 at +100 MiB for a slower arrival at 1000 nodes)."""
    out: States = {}
    keys = {k: k for k in before}  # the previous answer's own key strings
    for device, value in states.items():
        old = before.get(device)
        out[keys.get(device, device)] = old if old == value else value
    return out


def _without_field_sets(obj: dict[str, Any]) -> None:
    """Cut managedFields' fieldsV1 (the fields each manager owns, often a third of a pod) down to the names of the
    status fields it owns: the suite reads who the managers were (suite/others.py) and who wrote status.devices
    (observe/story.py), and every recorded change of every claim and pod kept its copy."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        owned = (entry.pop("fieldsV1", None) or {}).get("f:status")
        if isinstance(owned, dict):
            entry["fieldsV1"] = {"f:status": {key: {} for key in owned}}


ANY_DEVICE = "*"  # Recorder.hold_back: every device (the suite had the stack down)


@dataclass(frozen=True)
class Record:
    seq: int
    at: float  # time.time() when the watch delivered it (probe: when the answer came back)
    kind: str  # claim, pod, slice, node, event, taintrule, probe
    type: str  # SYNC, ADDED, MODIFIED, DELETED; probe: CHANGED
    namespace: str
    name: str
    revision: int | None  # resourceVersion (etcd revision); None for probe samples
    obj: dict[str, Any]


@dataclass(frozen=True)
class Sample:
    """One answer of the fabric probe: the fabric's state at some moment between `sent` and `received`."""

    sent: float
    received: float
    states: States
    free: tuple[dict[str, Any], ...] = ()


class _Stream(WatchCache):
    """A WatchCache over any list function (events), not only pods, nodes and custom resources."""

    def __init__(self, api: client.ApiClient, plural: str, func: Callable[..., Any], **kw: Any) -> None:
        super().__init__(api, "pods", **kw)
        self._func, self._args, self.plural = func, (), plural
        self._thread.name = f"record-{plural}"


@dataclass
class Recorder:
    """Records the run; start() once the cluster is up, probe(url) once the implementation is. A Recorder that is
    never started can be fed by hand (`feed`, `add_sample`): the unit tests do."""

    cluster: Cluster | None
    run_id: str
    attribute: str | None = None  # the profile's identityAttribute (slice summaries carry each device's identity)
    records: list[Record] = field(default_factory=list)
    dropped: int = 0
    probe_url: str | None = None
    probe_errors: list[str] = field(default_factory=list)
    started: float = 0.0
    stopped: float | None = None
    _seen: set[tuple[str, str, str, int]] = field(default_factory=set)
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _live: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # kind -> ns/name -> object
    _high: dict[str, int] = field(default_factory=dict)  # kind -> revision its stream has delivered everything up to
    _samples: list[Sample] = field(default_factory=list)  # every probe answer, in order of sending
    # device -> (moment, node) of its last change, when that change ended an attach with the device free without it
    # ever being attached: a failed attach (the fabric's own word, whatever the stack does about it)
    _failed: dict[str, tuple[float, str]] = field(default_factory=dict)
    _changed: dict[str, float] = field(default_factory=dict)  # device -> send time of the answer of its last change
    _models: dict[str, str] = field(default_factory=dict)  # device -> model, where the probe says it
    _reach: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)  # free[].nodes, one copy each
    # Fabric steps the suite itself held back (IMP-8 holds a detach across a restart): device -> [(from, to)]
    # (time.time()); the run-wide deadlines of that device count without them.
    held_back: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    _streams: list[WatchCache] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cond: threading.Condition = field(default_factory=threading.Condition)  # a new probe answer
    _stop: threading.Event = field(default_factory=threading.Event)
    _stop_probe: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Recorder:
        assert self.cluster is not None
        self.started = time.time()
        api = self.cluster.api
        core = client.CoreV1Api(api)
        rules = self.cluster.dynamic.resources.search(group="resource.k8s.io", kind="DeviceTaintRule")
        streams: list[WatchCache] = [
            WatchCache(api, "resourceclaims", "resource.k8s.io", "v1", **self._listeners("claim")),
            WatchCache(api, "pods", label_selector=f"{RUN_LABEL}={self.run_id}", **self._listeners("pod")),
            WatchCache(api, "resourceslices", "resource.k8s.io", "v1", **self._listeners("slice")),
            WatchCache(api, "nodes", **self._listeners("node")),
            _Stream(api, "events", core.list_event_for_all_namespaces, **self._listeners("event")),
        ]
        if rules:
            version = rules[0].api_version
            streams.append(
                WatchCache(api, "devicetaintrules", "resource.k8s.io", version, **self._listeners("taintrule"))
            )
        self._streams = [s.start() for s in streams]
        return self

    def hold_back(self, device: str, start: float, end: float) -> None:
        """The suite held `device`'s fabric step (a detach refused or hung, the role restarted meanwhile) from `start`
        to `end` (time.time())."""
        with self._lock:
            self.held_back.setdefault(device, []).append((start, end))

    def held_between(self, device: str, start: float, end: float) -> float:
        """Seconds of [start, end] during which the suite held `device`'s fabric step back, or had the stack down
        (ANY_DEVICE: a restart of one of its processes), overlaps counted once."""
        with self._lock:
            spans = sorted(
                (max(a, start), min(b, end))
                for a, b in [*self.held_back.get(device, ()), *self.held_back.get(ANY_DEVICE, ())]
            )
        total, reached = 0.0, start
        for a, b in spans:
            if b > max(a, reached):
                total += b - max(a, reached)
                reached = b
        return total

    def probe(self, url: str) -> None:
        """Sample the fabric probe every PROBE_PERIOD_S from now on; the first answer is in before this returns."""
        self.probe_url = url
        self._sample()
        threading.Thread(target=self._sample_loop, daemon=True, name="record-probe").start()

    def stop_probe(self) -> None:
        """Stop sampling (the implementation is going away: its probe's silence is no observation)."""
        self._stop_probe.set()

    def stop(self) -> None:
        self._stop.set()
        self._stop_probe.set()
        for stream in self._streams:
            stream.stop(wait=0)
        self.stopped = time.time()

    # -- recording -------------------------------------------------------------------------------------------
    def _on(self, kind: str) -> Callable[[str, dict[str, Any]], None]:
        return lambda event, obj: self.feed(kind, event, obj)

    def _listeners(self, kind: str) -> dict[str, Any]:
        """A stream's listeners: its events, and how far it has delivered."""
        return {"on_event": self._on(kind), "on_progress": lambda revision: self.progressed(kind, revision)}

    def progressed(self, kind: str, revision: int) -> None:
        """The stream of `kind` has delivered every change up to `revision` (a watch bookmark, the end of a list)."""
        with self._lock:
            self._high[kind] = max(self._high.get(kind, 0), revision)

    def high_water(self, kind: str) -> int:
        """The revision up to which the stream of `kind` has delivered every change (0: nothing yet). Streams lag one
        another: a pod's binding at revision r may come before the claim changes written before r; those are in the
        record once high_water("claim") >= r."""
        with self._lock:
            return self._high.get(kind, 0)

    def feed(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        """One watch event (SYNC for the objects of a (re)list)."""
        meta = obj["metadata"]
        ns, name = meta.get("namespace") or "", meta["name"]
        revision = int(meta.get("resourceVersion") or 0)
        with self._lock:
            if event != "SYNC":  # a list comes in no revision order: its end counts (progressed), not its objects
                self._high[kind] = max(self._high.get(kind, 0), revision)
            live = self._live.setdefault(kind, {})
            if event == "DELETED":
                live.pop(f"{ns}/{name}", None)
            else:
                live[f"{ns}/{name}"] = obj
            key = (kind, ns, name, revision)
            if key in self._seen and event != "DELETED":
                return  # a relist repeats what the watch delivered
            self._seen.add(key)
            if kind in ("claim", "pod"):
                _without_field_sets(obj)
            if kind == "slice":
                body = slice_summary(obj, self.attribute)
            elif kind == "node":
                body = node_summary(obj)
                if event not in ("DELETED", "ADDED") and self._nodes.get(name) == body:
                    return  # a heartbeat
                self._nodes[name] = body
            elif kind == "event":
                body = event_summary(obj)
            else:
                body = obj
            self._append(kind, event, ns, name, revision, body)

    def _append(
        self,
        kind: str,
        event: str,
        ns: str,
        name: str,
        revision: int | None,
        body: dict[str, Any],
        at: float | None = None,
    ) -> None:
        if len(self.records) >= MAX_RECORDS:
            self.dropped += 1
            return
        when = time.time() if at is None else at  # a probe change is dated by its sample, not by the bookkeeping
        self.records.append(Record(len(self.records), when, kind, event, ns, name, revision, body))

    def _sample_loop(self) -> None:
        slots = threading.BoundedSemaphore(PROBE_IN_FLIGHT)

        def one() -> None:
            try:
                self._sample()
            finally:
                slots.release()

        with ThreadPoolExecutor(PROBE_IN_FLIGHT, thread_name_prefix="record-probe") as pool:
            tick = time.monotonic()
            while not self._stop_probe.wait(max(0.0, tick + PROBE_PERIOD_S - time.monotonic())):
                tick = max(tick + PROBE_PERIOD_S, time.monotonic() - PROBE_PERIOD_S)
                if slots.acquire(blocking=False):
                    pool.submit(one)

    def _sample(self) -> None:
        sent = time.time()
        try:
            with endpoints.urlopen(self.probe_url, timeout=PROBE_TIMEOUT_S) as response:
                body = json.load(response)
            states = {a["device"]: (a["node"], a.get("state", "attached")) for a in body.get("attachments", [])}
            models = {a["device"]: str(a["model"]) for a in body.get("attachments", []) if a.get("model")}
        except (OSError, ValueError, KeyError) as exc:  # the fabric manager restarting, a slow answer: a gap
            if len(self.probe_errors) < 100:
                self.probe_errors.append(f"{time.strftime('%H:%M:%S')} {exc!r}")
            return
        with self._lock:
            self._models.update(models)
        free = tuple(self._shared_reach(entry) for entry in body.get("free") or ())
        self.add_sample(Sample(sent, time.time(), states, free))

    def _shared_reach(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A free count's `nodes` (every machine its fabric reaches: thousands at scale) as one shared tuple per
        distinct list, not a new list in each of ten answers a second."""
        if isinstance(nodes := entry.get("nodes"), list):
            key = tuple(nodes)
            entry["nodes"] = self._reach.setdefault(key, key)
        return entry

    def add_sample(self, sample: Sample) -> None:
        """Keep one probe answer, in order of sending; record the devices whose state it changed against the answer
        sent before it (the timelines show them)."""
        with self._cond:
            i = bisect.bisect_right(self._samples, sample.sent, key=lambda s: s.sent)
            previous = self._samples[i - 1] if i else None
            later = self._samples[i] if i < len(self._samples) else None  # an answer sent after it, come back first
            # The same attachments (free counts) as the answer before: keep that one's, so the record grows with the
            # fabric's changes, not with time x attachments (1000 devices held for minutes: hundreds of MiB otherwise).
            if previous is not None and previous.states == sample.states:
                sample = replace(sample, states=previous.states)
            elif previous is not None:  # a changed answer keeps the unchanged entries of the one before it
                sample = replace(sample, states=_shared(sample.states, previous.states))
            if previous is not None and previous.free == sample.free:
                sample = replace(sample, free=previous.free)
            self._samples.insert(i, sample)
            self._cond.notify_all()
        before = previous.states if previous else {}
        prev_at = previous.sent if previous else None
        after = later.states if later is not None else {}
        with self._lock:
            for device in sorted(set(sample.states) | set(before) | set(after)):
                old, new = before.get(device), sample.states.get(device)
                # Several answers in flight: a later one that came back first was judged against the answer before
                # both. What it already recorded is not recorded again (one attach counted twice: COST-2, soak
                # 2026-12-07 22:19); where it saw no change but this one shows one, the device went there and back
                # between them (attaching, then free: a failed attach).
                back = after.get(device)
                if old != new and (later is None or back != new):
                    self._change(device, old, new, sample.sent, prev_at)
                if later is not None and new != back and old == back:
                    self._change(device, new, back, later.sent, sample.sent)

    def _change(
        self, device: str, old: tuple[str, str] | None, new: tuple[str, str] | None, at: float, prev_at: float | None
    ) -> None:
        """Record one change of `device` seen in the answer sent at `at` (the one before it sent at `prev_at`). Called
        with the lock held."""
        node, st = new or ((old or ("", ""))[0], "free")
        if at >= self._changed.get(device, 0.0):
            self._changed[device] = at
            if new is None and old is not None and old[1] == "attaching":
                self._failed[device] = (at, old[0])
            else:
                self._failed.pop(device, None)
        body = {
            "device": device,
            "node": node,
            "state": st,
            "previous": list(old or ()),
            # The change happened between the previous answer and this one: both moments are kept.
            "previousSampleAt": prev_at,
        }
        self._append("probe", "CHANGED", "", device, None, body, at=at)

    # -- reading: the API's side -----------------------------------------------------------------------------
    def select(
        self, kinds: tuple[str, ...] = (), since: float = 0.0, until: float | None = None, namespace: str | None = None
    ) -> list[Record]:
        with self._lock:
            found = list(self.records)
        return [
            r
            for r in found
            if (not kinds or r.kind in kinds)
            and r.at >= since
            and (until is None or r.at <= until)
            and (namespace is None or r.namespace == namespace)
        ]

    def after_seq(self, seq: int) -> list[Record]:
        """Records from sequence number `seq` on (a reader that follows the record keeps its own position)."""
        with self._lock:
            return self.records[seq:]

    def live(self, kind: str) -> list[dict[str, Any]]:
        """The current objects of a kind as the watches last delivered them."""
        with self._lock:
            return list(self._live.get(kind, {}).values())

    def identities(self) -> dict[tuple[str, str], str]:
        """(pool, device) -> physical identity, from every slice seen in the run (cumulative)."""
        out: dict[tuple[str, str], str] = {}
        for r in self.select(("slice",)):
            for d in r.obj["devices"]:
                if "identity" in d:
                    out[(r.obj["pool"], d["name"])] = d["identity"]
        return out

    # -- reading: the fabric's side --------------------------------------------------------------------------
    @property
    def probed(self) -> bool:
        return self.probe_url is not None or bool(self._samples)

    def samples(self, since: float = 0.0) -> list[Sample]:
        with self._cond:
            i = bisect.bisect_left(self._samples, since, key=lambda s: s.sent)
            return self._samples[i:]

    def after(self, at: float, timeout: float = 10.0) -> States:
        """The probe's answer to the first request sent at or after `at` (waits for it): the fabric at `at` or
        later, so "not attached after the condition was seen True" proves the condition came first."""
        return self._answer_after(at, timeout).states

    def free_after(self, at: float, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The probe's free counts (`free: [{fabric, model, free, total, nodes}]`) in the first answer sent at or
        after `at`; empty when the probe does not report them."""
        return list(self._answer_after(at, timeout).free)

    def failed_attaches(self) -> dict[str, tuple[str, str | None]]:
        """Devices free now whose last change was an attach that ended without the device ever being attached (the
        fabric's word for a failed attach): device -> (node of that attach, model if the probe says it). An attach
        shorter than the probe period is not seen."""
        with self._lock:
            return {d: (node, self._models.get(d)) for d, (_at, node) in self._failed.items()}

    def now(self) -> States:
        return self.after(time.time())

    def latest(self) -> tuple[float, States, list[dict[str, Any]]] | None:
        """The newest answer: (send time of the first answer of the run of equal ones it ends, attachments, free
        counts); None before the first answer."""
        with self._cond:
            if not self._samples:
                return None
            last = self._samples[-1]
            i = len(self._samples) - 1
            while i > 0 and (self._samples[i - 1].states, self._samples[i - 1].free) == (last.states, last.free):
                i -= 1
            return self._samples[i].sent, last.states, list(last.free)

    def _answer_after(self, at: float, timeout: float) -> Sample:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                i = bisect.bisect_left(self._samples, at, key=lambda s: s.sent)
                if i < len(self._samples):
                    return self._samples[i]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no fabric probe answer after {at:.3f} in {timeout:g}s: {self.probe_errors[-3:]}"
                    )
                self._cond.wait(min(left, PROBE_PERIOD_S))

    def stats(self) -> dict[str, Any]:
        """How much was recorded and how well the probe was sampled (stated in the report)."""
        counts: dict[str, int] = {}
        for r in self.select():
            counts[r.kind] = counts.get(r.kind, 0) + 1
        samples = self.samples()
        gaps = sorted(b.sent - a.sent for a, b in itertools.pairwise(samples))
        latency = sorted(s.received - s.sent for s in samples)
        # The attachment rules (attachments.py) tolerate one period at the end of a binding-condition stretch.
        probe: dict[str, Any] = {
            "url": self.probe_url,
            "periodSeconds": PROBE_PERIOD_S,
            "toleranceSeconds": PROBE_PERIOD_S,
        }
        if self.probe_url:
            probe |= {"samples": len(samples), "errors": len(self.probe_errors)}
            if gaps:
                probe |= {
                    "gapMedianSeconds": round(gaps[len(gaps) // 2], 3),
                    "gapP99Seconds": round(gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))], 3),
                    "gapMaxSeconds": round(gaps[-1], 3),
                    "answerP99Seconds": round(latency[min(len(latency) - 1, int(len(latency) * 0.99))], 3),
                }
        return {"records": counts, "dropped": self.dropped, "maxRecords": MAX_RECORDS, "probe": probe}
