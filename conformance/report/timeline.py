"""A scenario's timeline, built from the run-wide record: what happened to its claims, pods and devices, when.

Moments: claim created, allocated (device, node), each binding/failure condition's transitions, all binding
conditions True, deallocated, reallocated, deleted; pod created, nominated, bound, Running, deleted; events
(BindingConditionsPending, FailedScheduling "binding timeout"); attach/detach as the fabric probe reported them.
Times are seconds from the scenario's start. Moments that decide a requirement carry its ids (`decides`).
The JSON is the data; `svg()` draws one lane per claim, pod and device.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# After its scenario ended, a device's lane follows the fabric until the device is free again (the detach, IMP-5),
# for at most this long.
DETACH_TAIL_S = 90.0


@dataclass(frozen=True)
class Window:
    """What belongs to one scenario: its time, namespaces and leased physical devices."""

    name: str
    start: float
    end: float
    outcome: str
    namespaces: frozenset[str]
    identities: frozenset[str]


def _alloc_node(allocation: dict[str, Any]) -> str | None:
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    names = {
        v
        for t in terms
        for f in t.get("matchFields") or []
        if f.get("key") == "metadata.name" and f.get("operator") == "In"
        for v in f.get("values") or []
    }
    return next(iter(names)) if len(names) == 1 else None


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _conditions(claim: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, str]]:
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for entry in (claim.get("status") or {}).get("devices") or []:
        key = (entry["driver"], entry["pool"], entry["device"])
        out[key] = {c["type"]: c["status"] for c in entry.get("conditions") or []}
        for c in entry.get("conditions") or []:
            out[key][c["type"] + "#reason"] = c.get("reason") or ""
    return out


class _Builder:
    def __init__(self, window: Window, identities: dict[tuple[str, str], str]) -> None:
        self.w = window
        self.identity_of = identities
        self.lanes: dict[str, dict[str, Any]] = {}
        self.moments: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []
        self._open: dict[tuple[str, str], float] = {}

    def lane(self, kind: str, name: str) -> str:
        lane_id = f"{kind} {name}"
        self.lanes.setdefault(lane_id, {"id": lane_id, "kind": kind, "name": name})
        return lane_id

    def device_lane(self, pool: str, device: str) -> str:
        identity = self.identity_of.get((pool, device))
        return self.lane("device", identity or f"{pool}/{device}")

    def moment(self, at: float, lane: str, what: str, detail: str = "", decides: Iterable[str] = (), **kw: Any) -> None:
        self.moments.append(
            {"t": round(at - self.w.start, 3), "lane": lane, "what": what, "detail": detail, "decides": list(decides)}
            | kw
        )

    def open(self, lane: str, state: str, at: float) -> None:
        self._open.setdefault((lane, state), at)

    def close(self, lane: str, state: str, at: float) -> None:
        began = self._open.pop((lane, state), None)
        if began is not None:
            self.spans.append(
                {
                    "lane": lane,
                    "state": state,
                    "from": round(began - self.w.start, 3),
                    "to": round(at - self.w.start, 3),
                }
            )

    def close_all(self, at: float) -> None:
        for lane, state in list(self._open):
            self.close(lane, state, at)


def _claims(b: _Builder, records: list[Any]) -> set[str]:
    """Moments of the scenario's claims; returns the identities (or pool/device) its claims were allocated."""
    used: set[str] = set()
    state: dict[str, dict[str, Any]] = {}
    holders: dict[str, set[str]] = {}  # device lane -> claims whose allocation holds it (one physical device)
    for r in records:
        if r.kind != "claim" or r.namespace not in b.w.namespaces:
            continue
        lane = b.lane("claim", f"{r.namespace}/{r.name}")
        seen = state.setdefault(lane, {"alloc": None, "conds": {}, "ready": False, "deleting": False})
        rev = {"revision": r.revision}
        if r.type in ("ADDED", "SYNC") and seen["alloc"] is None and not seen.get("created"):
            seen["created"] = True
            b.moment(r.at, lane, "created", **rev)
        results = [] if r.type == "DELETED" else _results(r.obj)
        allocation = (r.obj.get("status") or {}).get("allocation") or {}
        ident = (
            (allocation.get("allocationTimestamp"), tuple((x["pool"], x["device"]) for x in results))
            if results
            else None
        )
        if seen["alloc"] is not None and ident != seen["alloc"]:
            if r.type != "DELETED":  # not gone with the claim
                # After a failure condition: SCH-5's reschedule; before the conditions were all True: SCH-6's
                # timeout; after they were: a release once the pod is gone (nothing to decide).
                decides = ("SCH-5",) if seen.get("failed") else ("SCH-6",) if not seen.get("was_ready") else ()
                b.moment(r.at, lane, "deallocated", decides=decides, **rev)
            b.close(lane, "allocated", r.at)
            b.close(lane, "ready", r.at)
            for pool, device in seen["alloc"][1]:
                dlane = b.device_lane(pool, device)
                b.moment(r.at, dlane, "released", f"by {r.name}", **rev)
                b.close(dlane, f"allocated {r.name}", r.at)
                holders.setdefault(dlane, set()).discard(r.name)
            seen["ready"], seen["conds"], seen["failed"], seen["was_ready"] = False, {}, False, False
        if ident is not None and ident != seen["alloc"]:
            node = _alloc_node(allocation)
            again = "reallocated" if seen.get("was_allocated") else "allocated"
            devices = ", ".join(f"{x['pool']}/{x['device']}" for x in results)
            b.moment(r.at, lane, again, f"{devices} on {node or 'any node'}", decides=("SCH-2",), **rev)
            b.open(lane, "allocated", r.at)
            for x in results:
                dlane = b.device_lane(x["pool"], x["device"])
                used.add(b.lanes[dlane]["name"])
                b.moment(r.at, dlane, "allocated", f"to {r.name} on {node or 'any node'}", **rev)
                others = holders.setdefault(dlane, set()) - {r.name}
                if others:  # the same physical device in two live allocations
                    b.moment(
                        r.at,
                        dlane,
                        "held twice",
                        f"by {r.name} and {', '.join(sorted(others))}",
                        decides=("IMP-6",),
                        **rev,
                    )
                holders[dlane].add(r.name)
                b.open(dlane, f"allocated {r.name}", r.at)
            seen["was_allocated"] = True
        seen["alloc"] = ident
        conds = _conditions(r.obj) if results else {}
        for x in results:
            key = (x["driver"], x["pool"], x["device"])
            now, before = conds.get(key, {}), seen["conds"].get(key, {})
            failure_types = set(x.get("bindingFailureConditions") or [])
            for ctype in sorted(t for t in now if not t.endswith("#reason")):
                if now[ctype] != before.get(ctype):
                    failing = ctype in failure_types and now[ctype] == "True"
                    seen["failed"] = seen.get("failed") or failing
                    b.moment(
                        r.at,
                        lane,
                        f"{ctype.rsplit('/', 1)[-1]}={now[ctype]}",
                        f"{x['pool']}/{x['device']} {ctype}={now[ctype]} {now.get(ctype + '#reason', '')}".strip(),
                        decides=("SCH-5", "IMP-4") if failing else (),
                        **rev,
                    )
        wanted = [(x, t) for x in results for t in x.get("bindingConditions") or []]
        ready = bool(wanted) and all(
            conds.get((x["driver"], x["pool"], x["device"]), {}).get(t) == "True" for x, t in wanted
        )
        seen["was_ready"] = seen.get("was_ready") or ready
        if ready and not seen["ready"]:
            b.moment(r.at, lane, "conditions ready", "every binding condition True", decides=("IMP-3", "SCH-4"), **rev)
            b.open(lane, "ready", r.at)
        seen["ready"], seen["conds"] = ready, conds
        if r.obj.get("metadata", {}).get("deletionTimestamp") and not seen["deleting"]:
            seen["deleting"] = True
            b.moment(r.at, lane, "deleting", **rev)
        if r.type == "DELETED":
            b.moment(r.at, lane, "deleted", **rev)
            b.close(lane, "allocated", r.at)
            b.close(lane, "ready", r.at)
    return used


def _pods(b: _Builder, records: list[Any]) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.kind != "pod" or r.namespace not in b.w.namespaces:
            continue
        lane = b.lane("pod", f"{r.namespace}/{r.name}")
        s = seen.setdefault(lane, {})
        rev = {"revision": r.revision}
        spec, status = r.obj.get("spec") or {}, r.obj.get("status") or {}
        if not s.get("created"):
            s["created"] = True
            b.moment(r.at, lane, "created", **rev)
        nominated = status.get("nominatedNodeName")
        if nominated and nominated != s.get("nominated"):
            s["nominated"] = nominated
            b.moment(r.at, lane, "nominated", nominated, decides=("SCH-3",), **rev)
        node = spec.get("nodeName")
        if node and not s.get("bound") and r.type != "DELETED":
            s["bound"] = node
            b.moment(r.at, lane, "bound", node, decides=("SCH-3", "SCH-4", "IMP-2"), **rev)
            b.open(lane, "bound", r.at)
        if status.get("phase") == "Running" and not s.get("running"):
            s["running"] = True
            b.moment(r.at, lane, "running", **rev)
        if r.obj.get("metadata", {}).get("deletionTimestamp") and not s.get("deleting"):
            s["deleting"] = True
            b.moment(r.at, lane, "deleting", **rev)
        if r.type == "DELETED":
            b.moment(r.at, lane, "deleted", **rev)
            b.close(lane, "bound", r.at)


_DECISIVE_EVENTS = {"BindingConditionsPending": ("SCH-3",)}


def _events(b: _Builder, records: list[Any]) -> None:
    shown: set[tuple[str, str, str]] = set()
    for r in records:
        if r.kind != "event" or r.namespace not in b.w.namespaces:
            continue
        obj = r.obj["object"]
        kind = {"Pod": "pod", "ResourceClaim": "claim"}.get(obj.get("kind") or "")
        if kind is None:
            continue
        lane = b.lane(kind, f"{obj.get('namespace')}/{obj.get('name')}")
        key = (lane, r.obj["reason"] or "", r.obj["message"] or "")
        if key in shown:
            continue
        shown.add(key)
        decides = _DECISIVE_EVENTS.get(r.obj["reason"] or "", ())
        if "binding timeout" in (r.obj["message"] or ""):
            decides = ("SCH-6", "BASE-2")  # BASE-2: its eventTime dates the timeout the scheduler runs
        b.moment(r.at, lane, f"event {r.obj['reason']}", r.obj["message"] or "", decides=decides, event=True)


def _fabric(b: _Builder, records: list[Any], identities: set[str], until: float) -> None:
    after_end: dict[str, bool] = {}
    for r in records:
        if r.kind != "probe" or r.name not in identities or r.at < b.w.start:
            continue
        if r.at > b.w.end and (after_end.get(r.name) or r.at > b.w.end + DETACH_TAIL_S):
            continue  # the device is someone else's now
        lane = b.lane("device", r.name)
        state, node = r.obj["state"], r.obj["node"]
        decides: tuple[str, ...] = ()
        if state == "attached":
            decides = ("IMP-2", "IMP-3")
            b.open(lane, f"attached {node}", r.at)
        else:
            for key in [k for k in b._open if k[0] == lane and k[1].startswith("attached ")]:
                b.close(lane, key[1], r.at)
        if state == "free":
            decides = ("IMP-5",)
            if r.at > b.w.end:
                after_end[r.name] = True
        since = r.obj.get("previousSampleAt")
        window = f"; happened after {since - b.w.start:.3f}s (the previous sample)" if since else ""
        b.moment(
            r.at,
            lane,
            f"fabric {state}",
            f"{node} (was {'/'.join(r.obj['previous']) or 'free'}{window})",
            decides=decides,
            fabric=True,
        )
    del until


_PHASES = (  # (what, lane kind, phase it starts): the phases of a scenario as its timeline shows them
    ("created", "claim", "claims created: scheduling"),
    ("allocated", "claim", "allocated: waiting in PreBind for the binding conditions"),
    ("bound", "pod", "bound"),
    ("deleting", "pod", "clean-up: pods and claims deleted"),
    ("fabric free", "device", "released devices detached in the fabric"),
)


def phases(timeline: dict[str, Any]) -> list[tuple[float, str]]:
    """(start, phase) from the first moment of each kind, in time order (for Allure's steps)."""
    kinds = {lane["id"]: lane["kind"] for lane in timeline["lanes"]}
    found = []
    for what, kind, phase in _PHASES:
        first = next((m["t"] for m in timeline["moments"] if m["what"] == what and kinds.get(m["lane"]) == kind), None)
        if first is not None:
            found.append((first, phase))
    return sorted(found)


def build(window: Window, records: list[Any], identities: dict[tuple[str, str], str]) -> dict[str, Any]:
    """The timeline of one scenario from the run's records (conformance.observe.recorder.Record)."""
    b = _Builder(window, identities)
    ordered = sorted(records, key=lambda r: r.seq)
    used = _claims(b, ordered)
    _pods(b, ordered)
    _events(b, ordered)
    devices = set(window.identities) | used
    last = max([window.end] + [r.at for r in ordered if r.kind == "probe" and r.name in devices])
    _fabric(b, ordered, devices, last)
    end = max([window.end] + [m["t"] + window.start for m in b.moments])
    b.close_all(end)
    order = {"claim": 0, "pod": 1, "device": 2}
    lanes = sorted(b.lanes.values(), key=lambda lane: (order.get(lane["kind"], 3), lane["name"]))
    return {
        "scenario": window.name,
        "outcome": window.outcome,
        "start": window.start,
        "seconds": round(window.end - window.start, 3),
        "shownUntil": round(end - window.start, 3),
        "namespaces": sorted(window.namespaces),
        "devices": sorted(window.identities),
        "lanes": lanes,
        "moments": sorted(b.moments, key=lambda m: m["t"]),
        "spans": b.spans,
    }


# -- drawing ---------------------------------------------------------------------------------------------------
_COLOURS = {"allocated": "#cfe2ff", "ready": "#b6e3b6", "bound": "#9fd39f"}
_LABEL_W, _LANE_H, _WIDTH, _TOP = 250, 40, 1150, 34


def scenario_words(outcome: str) -> str:
    """A scenario's outcome as the reports show it: one that ended without an error "ran to its end" (not "passed":
    its requirements are judged by its tests, and may have failed on what it saw)."""
    return "ran to its end" if outcome == "passed" else outcome


def svg(timeline: dict[str, Any]) -> str:
    """One lane per claim, pod and device; spans for allocated/ready/bound/attached; decisive moments in red
    with their requirement ids; every mark has a tooltip (time, what, detail)."""
    lanes = timeline["lanes"]
    total = max(timeline["shownUntil"], 1.0)
    plot = _WIDTH - _LABEL_W - 70  # room for the last label
    height = _TOP + _LANE_H * max(1, len(lanes)) + 30

    def x(t: float) -> float:
        return _LABEL_W + max(0.0, t) / total * plot

    row = {lane["id"]: i for i, lane in enumerate(lanes)}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" font-family="sans-serif" font-size="11" role="img">',
        f"<title>{html.escape(timeline['scenario'])}: {html.escape(scenario_words(timeline['outcome']))}</title>",
        f'<text x="4" y="14" font-weight="bold">{html.escape(timeline["scenario"])} '
        f"(scenario {html.escape(scenario_words(timeline['outcome']))},"
        f" {timeline['seconds']:.1f} s; red = decides a requirement)</text>",
    ]
    step = _tick(total)
    t = 0.0
    while t <= total + 1e-9:
        out.append(f'<line x1="{x(t):.1f}" y1="{_TOP - 6}" x2="{x(t):.1f}" y2="{height - 24}" stroke="#eee"/>')
        out.append(f'<text x="{x(t):.1f}" y="{height - 10}" text-anchor="middle" fill="#555">{t:g}s</text>')
        t += step
    end_x = x(timeline["seconds"])
    out.append(
        f'<line x1="{end_x:.1f}" y1="{_TOP - 6}" x2="{end_x:.1f}" y2="{height - 24}" stroke="#888" '
        'stroke-dasharray="4 3"><title>scenario end</title></line>'
    )
    for i, lane in enumerate(lanes):
        y = _TOP + i * _LANE_H
        out.append(f'<rect x="0" y="{y}" width="{_WIDTH}" height="{_LANE_H}" fill="{"#fafafa" if i % 2 else "#fff"}"/>')
        label = lane["name"] if len(lane["name"]) < 34 else "…" + lane["name"][-33:]
        out.append(
            f'<text x="4" y="{y + 19}"><tspan fill="#777">{lane["kind"]}</tspan> {html.escape(label)}'
            f"<title>{html.escape(lane['id'])}</title></text>"
        )
    for span in timeline["spans"]:
        if span["lane"] not in row:
            continue
        y = _TOP + row[span["lane"]] * _LANE_H + 8
        colour = "#f4c27a" if span["state"].startswith("attached") else _COLOURS.get(span["state"].split()[0], "#ddd")
        width = max(1.0, x(span["to"]) - x(span["from"]))
        out.append(
            f'<rect x="{x(span["from"]):.1f}" y="{y}" width="{width:.1f}" height="{_LANE_H - 16}" fill="{colour}" '
            f'opacity="0.8"><title>{html.escape(span["state"])} {span["from"]:.2f}-{span["to"]:.2f} s</title></rect>'
        )
    label_end: dict[tuple[str, int], float] = {}  # (lane, label row) -> x where its last label ends
    for m in timeline["moments"]:
        if m["lane"] not in row:
            continue
        cx, cy = x(m["t"]), _TOP + row[m["lane"]] * _LANE_H + _LANE_H / 2
        tip = html.escape(
            f"{m['t']:.3f} s {m['what']} {m['detail']}".strip()
            + (f" [decides {', '.join(m['decides'])}]" if m["decides"] else "")
            + (f" rv {m['revision']}" if m.get("revision") else "")
        )
        if m["decides"]:
            out.append(f'<path d="M{cx:.1f},{cy - 6} l6,6 l-6,6 l-6,-6 z" fill="#d62728"><title>{tip}</title></path>')
            text = m["what"][:22]
            # Labels of close moments take turns above and below the lane instead of overprinting each other.
            above = cx >= label_end.get((m["lane"], 0), 0.0)
            level = 0 if above or cx < label_end.get((m["lane"], 1), 0.0) else 1
            label_end[(m["lane"], level)] = cx + 4 + 5 * len(text)
            ty = cy - 7 if level == 0 else cy + 16
            out.append(f'<text x="{cx + 4:.1f}" y="{ty:.1f}" fill="#a00" font-size="9">{html.escape(text)}</text>')
        else:
            fill = "#1f77b4" if not m.get("event") else "#9467bd"
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{fill}"><title>{tip}</title></circle>')
    out.append("</svg>")
    return "\n".join(out)


def _tick(total: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300):
        if total / step <= 12:
            return step
    return 600.0
