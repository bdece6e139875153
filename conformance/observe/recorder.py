"""The run-wide record: every change of claims, the run's pods, slices, nodes, events and taint rules, each with
its resourceVersion (the etcd revision), plus the fabric probe sampled every PROBE_PERIOD_S where the profile has
one. Timelines, failure snapshots and the gathered objects are read from it, after the fact.

Claims and pods are kept whole (a timeline needs their conditions); slices and nodes as summaries (devices and
identities; readiness, labels, taints), so a run of hundreds of pool rewrites stays in memory. A node's heartbeat
is not a change worth recording: only a changed summary is.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.objects import RUN_LABEL
from conformance.implementation import endpoints
from conformance.observe.watchcache import WatchCache

PROBE_PERIOD_S = 0.1  # the fabric probe's sampling period (the issue asks for at most 0.2 s)
PROBE_TIMEOUT_S = 2.0
MAX_RECORDS = 400_000  # beyond this the record keeps counting but stops storing (said in its stats)


@dataclass(frozen=True)
class Record:
    seq: int
    at: float  # time.time() when the watch delivered it (or the probe was sampled)
    kind: str  # claim, pod, slice, node, event, taintrule, probe
    type: str  # SYNC, ADDED, MODIFIED, DELETED; probe: CHANGED
    namespace: str
    name: str
    revision: int | None  # resourceVersion (etcd revision); None for probe samples
    obj: dict[str, Any]


class _Stream(WatchCache):
    """A WatchCache over any list function (nodes, events), not only pods and custom resources."""

    def __init__(self, api: client.ApiClient, plural: str, func: Callable[..., Any], **kw: Any) -> None:
        super().__init__(api, "pods", **kw)
        self._func, self._args, self.plural = func, (), plural
        self._thread.name = f"record-{plural}"


def slice_summary(obj: dict[str, Any], attribute: str | None) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    devices = []
    for d in spec.get("devices") or []:
        value = ((d.get("attributes") or {}).get(attribute or "") or {}) if attribute else {}
        devices.append({"name": d["name"], **({"identity": str(next(iter(value.values())))} if value else {})})
    where = spec.get("nodeName") or (
        "allNodes" if spec.get("allNodes") else "nodeSelector" if spec.get("nodeSelector") else ""
    )
    return {
        "driver": spec.get("driver"),
        "pool": (spec.get("pool") or {}).get("name"),
        "generation": (spec.get("pool") or {}).get("generation"),
        "where": where,
        "devices": devices,
    }


def node_summary(obj: dict[str, Any]) -> dict[str, Any]:
    conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
    spec = obj.get("spec") or {}
    return {
        "labels": obj["metadata"].get("labels") or {},
        "ready": conditions.get("Ready"),
        "taints": spec.get("taints") or [],
        "unschedulable": bool(spec.get("unschedulable")),
    }


def event_summary(obj: dict[str, Any]) -> dict[str, Any]:
    involved = obj.get("involvedObject") or {}
    return {
        "reason": obj.get("reason"),
        "message": obj.get("message"),
        "type": obj.get("type"),
        "count": obj.get("count"),
        "object": {k: involved.get(k) for k in ("kind", "namespace", "name")},
        "source": (obj.get("source") or {}).get("component") or obj.get("reportingComponent"),
    }


@dataclass
class Recorder:
    """Records the run; start() once the cluster is up, probe(url) once the implementation is."""

    cluster: Cluster
    run_id: str
    attribute: str | None = None  # the profile's identityAttribute (slice summaries carry each device's identity)
    records: list[Record] = field(default_factory=list)
    dropped: int = 0
    probe_url: str | None = None
    probe_samples: int = 0
    probe_errors: list[str] = field(default_factory=list)
    probe_gaps: list[float] = field(default_factory=list)  # seconds between consecutive samples
    started: float = 0.0
    stopped: float | None = None
    _seen: set[tuple[str, str, str, int]] = field(default_factory=set)
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    _live: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # kind -> ns/name -> object
    _probe_state: dict[str, tuple[str, str]] = field(default_factory=dict)
    _streams: list[WatchCache] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Recorder:
        self.started = time.time()
        api = self.cluster.api
        core = client.CoreV1Api(api)
        rules = self.cluster.dynamic.resources.search(group="resource.k8s.io", kind="DeviceTaintRule")
        streams: list[WatchCache] = [
            WatchCache(api, "resourceclaims", "resource.k8s.io", "v1", on_event=self._on("claim")),
            WatchCache(api, "pods", label_selector=f"{RUN_LABEL}={self.run_id}", on_event=self._on("pod")),
            WatchCache(api, "resourceslices", "resource.k8s.io", "v1", on_event=self._on("slice")),
            _Stream(api, "nodes", core.list_node, on_event=self._on("node")),
            _Stream(api, "events", core.list_event_for_all_namespaces, on_event=self._on("event")),
        ]
        if rules:
            streams.append(
                WatchCache(
                    api, "devicetaintrules", "resource.k8s.io", rules[0].api_version, on_event=self._on("taintrule")
                )
            )
        self._streams = [s.start() for s in streams]
        return self

    def probe(self, url: str) -> None:
        """Sample the fabric probe (identity -> node, state) every PROBE_PERIOD_S; record each change."""
        self.probe_url = url
        threading.Thread(target=self._sample_loop, daemon=True, name="record-probe").start()

    def stop(self) -> None:
        self._stop.set()
        for stream in self._streams:
            stream.stop(wait=0)
        self.stopped = time.time()

    # -- recording -------------------------------------------------------------------------------------------
    def _on(self, kind: str) -> Callable[[str, dict[str, Any]], None]:
        def record(event: str, obj: dict[str, Any]) -> None:
            meta = obj["metadata"]
            ns, name = meta.get("namespace") or "", meta["name"]
            revision = int(meta.get("resourceVersion") or 0)
            with self._lock:
                live = self._live.setdefault(kind, {})
                if event == "DELETED":
                    live.pop(f"{ns}/{name}", None)
                else:
                    live[f"{ns}/{name}"] = obj
                key = (kind, ns, name, revision)
                if key in self._seen and event != "DELETED":
                    return  # a relist repeats what the watch delivered
                self._seen.add(key)
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

        return record

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
        last = None
        while not self._stop.is_set():
            now = time.time()
            try:
                with endpoints.urlopen(self.probe_url, timeout=PROBE_TIMEOUT_S) as response:
                    body = json.load(response)
                state = {a["device"]: (a["node"], a.get("state", "attached")) for a in body.get("attachments", [])}
            except (OSError, ValueError, KeyError) as exc:
                if len(self.probe_errors) < 100:
                    self.probe_errors.append(f"{time.strftime('%H:%M:%S')} {exc!r}")
            else:
                with self._lock:
                    self.probe_samples += 1
                    if last is not None:
                        self.probe_gaps.append(now - last)
                    # A change happened between the previous sample and this one: both moments are kept.
                    previous_sample, last = last, now
                    for device in sorted(set(state) | set(self._probe_state)):
                        before, after = self._probe_state.get(device), state.get(device)
                        if before != after:
                            node, st = after or ((before or ("", ""))[0], "free")
                            body = {
                                "device": device,
                                "node": node,
                                "state": st,
                                "previous": list(before or ()),
                                "previousSampleAt": previous_sample,
                            }
                            self._append("probe", "CHANGED", "", device, None, body, at=now)
                    self._probe_state = state
            self._stop.wait(max(0.0, PROBE_PERIOD_S - (time.time() - now)))

    # -- reading ---------------------------------------------------------------------------------------------
    def select(self, kinds: tuple[str, ...] = (), since: float = 0.0, until: float | None = None) -> list[Record]:
        with self._lock:
            found = list(self.records)
        return [
            r for r in found if (not kinds or r.kind in kinds) and r.at >= since and (until is None or r.at <= until)
        ]

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

    def stats(self) -> dict[str, Any]:
        """How much was recorded and how well the probe was sampled (stated in the report)."""
        counts: dict[str, int] = {}
        for r in self.select():
            counts[r.kind] = counts.get(r.kind, 0) + 1
        gaps = sorted(self.probe_gaps)
        probe: dict[str, Any] = {"url": self.probe_url, "periodSeconds": PROBE_PERIOD_S}
        if self.probe_url:
            probe |= {"samples": self.probe_samples, "errors": len(self.probe_errors)}
            if gaps:
                probe |= {
                    "gapMedianSeconds": round(gaps[len(gaps) // 2], 3),
                    "gapP99Seconds": round(gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))], 3),
                    "gapMaxSeconds": round(gaps[-1], 3),
                }
        return {"records": counts, "dropped": self.dropped, "maxRecords": MAX_RECORDS, "probe": probe}
