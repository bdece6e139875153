"""Shared waits of the lifecycle scenarios: an attach a fault caught in flight, a device let go (detached and offered
again, for good) and the binding conditions a namespace's claims ever showed True, read from the run-wide record."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kubernetes.client.exceptions import ApiException

from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.faults import FaultInjector
from conformance.observe.attachments import data_identity
from conformance.observe.devices import Lease
from conformance.observe.invariants import PERSIST_S
from conformance.observe.recorder import PROBE_PERIOD_S, Recorder
from conformance.observe.slices import allocation_results, device_conditions
from conformance.observe.views import History
from conformance.suite.implementation.context import Context


def delete_pod(ctx: Context, ns: str, history: History, pod: str = "app") -> None:
    """Delete the pod at once and the namespace's claims (a generated claim may be gone already)."""
    ctx.cluster.core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
    for claim in history.latest("claim"):
        try:
            ctx.cluster.resource.delete_namespaced_resource_claim(claim, ns)
        except ApiException as exc:
            if exc.status != 404:  # the resourceclaim controller may have removed the generated claim already
                raise


def attaching(ctx: Context, faults: FaultInjector, fault: str, node: str, timeout: float, held: int = 0) -> str:
    """The device whose attach to `node` the fault `fault` hit, once the probe lists it (the attach began on the
    fabric). `held`: other fabric operations the scenario holds in flight meanwhile (said when the wait runs out: a
    stack that runs fewer at once declares fabricConcurrency)."""
    probe = ctx.probe
    assert probe is not None, "the probe is needed"

    def seen() -> str | None:
        hits = faults.hits(fault)
        device = str(hits[0]["device"]) if hits else None
        return device if device and probe.now().get(device) else None

    held_note = (
        f"; up to {held} other fabric operation(s) held in flight meanwhile by this scenario (a stack that runs fewer "
        "at once declares fabricConcurrency)"
        if held
        else ""
    )
    return wait_for(
        seen,
        bool,
        timeout=timeout,
        expected=f"an attach to {node} hit by fault {fault} and listed by the probe{held_note}",
        interval=PROBE_PERIOD_S / 2,
        max_interval=PROBE_PERIOD_S,
    )


@dataclass
class LetGo:
    """How a device the scenario used ended: detached and offered again within the deadline, or not."""

    devices: list[str]
    deadline_s: float
    after_s: float | None = None  # from the moment counted from to detached and offered again (for PERSIST_S)
    detached_s: float | None = None  # from the moment counted from to the probe's first answer without them attached
    down_s: float = 0.0  # seconds the scenario itself held the begun detach back (added to the deadline)
    last_seen: str = ""  # the wait's message when it ran out
    # Each device on its own (a claim of several is judged per device): seconds to the first probe answer without it
    # attached there, and what was last seen of it (the probe's state, its free entries).
    gone_s: dict[str, float] = field(default_factory=dict)
    last: dict[str, str] = field(default_factory=dict)

    def problem(self) -> str:
        if self.after_s is not None and self.after_s <= self.deadline_s + self.down_s:
            return ""
        said = self.last_seen or f"{self.devices} let go after {self.after_s}s, promised {self.deadline_s:g}s"
        return f"{said}\n" + "\n".join(f"  {line}" for line in self.per_device())

    def per_device(self) -> list[str]:
        """One line per device: when it left the node (or that it never did) and what was last seen of it."""
        out = []
        for d in self.devices:
            gone = self.gone_s.get(d)
            when = f"detached after {gone:g}s" if gone is not None else "never seen detached"
            out.append(f"{d}: {when}; last seen: {self.last.get(d, 'nothing')}")
        return out


def let_go(
    ctx: Context,
    devices: list[str],
    lease: Lease,
    since: float,
    deadline_s: float,
    down_s: float = 0.0,
    interval: float = PROBE_PERIOD_S,
) -> LetGo:
    """Wait until `devices` are detached (not in the probe) and offered again for PERSIST_S (identified entries: one
    free entry each; count-based: no idle copy, and the pool offers every free device of the fabric but those a
    failed attach lets it withhold: InvariantWatcher.counted_complete), counting
    `deadline_s` from `since` (time.monotonic()). `down_s`: seconds after `since` the scenario itself held the begun
    detach back (IMP-8 holds it in flight across its restart of the stack): a held detach cannot complete, so
    detachSeconds counts the rest; no one else's restart is counted (restart scenarios run alone). `interval`: how
    often it is looked at, the resolution of the measured times."""
    probe, watcher = ctx.probe, ctx.invariants
    assert probe is not None and watcher is not None, "the probe and the session's watcher are needed"
    seen = LetGo(sorted(devices), deadline_s, down_s=round(down_s, 3))
    met: list[float] = []

    # Count-based entries name no device: once detached from the scenario's node, the device is the fabric's again and
    # another scenario may attach it elsewhere at once (soak of 2026-12-04, round 6: IMP-15's device was attached to
    # node-6 for another pod 1.4 s after it left node-2). What is judged is the scenario's node: nothing of it
    # attached there, no idle copy of it there, and the pool's capacity complete.
    where = lease.node if lease.counted is not None else None

    def observe() -> tuple[dict[str, tuple[str, str]], list[str]]:
        states = {d: s for d, s in probe.now().items() if d in devices and (where is None or s[0] == where)}
        # Per device: its free entries (identified: exactly one, for good; count-based: no idle copy left on the node)
        offers = {d: watcher.free_entries(d, where) for d in devices}
        if lease.counted is not None:
            complete, said = watcher.counted_complete(lease.counted.pool, lease.counted.model)
            free = [said, *(f for entries in offers.values() for f in entries)]
            back = not any(offers.values()) and complete
        else:
            free = [f for entries in offers.values() for f in entries]
            back = all(len(entries) == 1 for entries in offers.values())
        for d in devices:
            state = states.get(d)
            if state is None:
                seen.gone_s.setdefault(d, round(time.monotonic() - since, 3))
            said_d = f"{state[1]} on {state[0]}" if state else "not attached"
            seen.last[d] = f"{said_d}; {'idle copies' if where else 'free entries'} {offers[d]}"
        if not states and seen.detached_s is None:
            seen.detached_s = round(time.monotonic() - since, 3)
        if not states and back:
            met[:] = met or [time.monotonic()]
        else:
            met.clear()
        return states, free

    try:
        wait_for(
            observe,
            lambda _: bool(met) and time.monotonic() - met[0] >= PERSIST_S,
            timeout=max(0.0, since + seen.deadline_s + seen.down_s - time.monotonic()) + PERSIST_S + PROBE_PERIOD_S,
            expected=f"{seen.devices} detached ({f'from {where}' if where else 'not in the probe'}) and offered again "
            f"for {PERSIST_S:g}s, within "
            f"{deadline_s:g}s" + (f" (+{seen.down_s:g}s the scenario held the detach back)" if down_s else ""),
            describe=lambda o: f"probe: {o[0] if o else None}, free entries: {o[1] if o else None}",
            interval=interval,
            max_interval=interval,
        )
        seen.after_s = round(met[0] - since, 3)
        # In the report's figures: how close to the promise each came (the time the scenario held the detach back is
        # not the stack's: a restart cell's let-go of 45 s with 30 s held is 15 s against the promise).
        ctx.measure("let_go_seconds", round(seen.after_s - seen.down_s, 3))
    except WaitTimeout as exc:
        seen.last_seen = str(exc)
    return seen


def attached_at(probe: Recorder, device: str, node: str, since: float) -> float | None:
    """When the fabric first answered that `device` is attached to `node` (the answer's sending time), since `since`
    (time.time()); None if it never did."""
    return next((s.sent for s in probe.samples(since) if s.states.get(device) == (node, "attached")), None)


def first_listed(probe: Recorder, node: str, since: float) -> dict[str, float]:
    """When the fabric first listed each device on `node` (attaching, attached, detaching) from `since` (time.time())
    on: the sending time of that answer."""
    first: dict[str, float] = {}
    for sample in probe.samples(since):
        for device, (where, _) in sample.states.items():
            if where == node:
                first.setdefault(device, sample.sent)
    return first


def listed_since(probe: Recorder, node: str, since: float, among: set[str] | None = None) -> list[str]:
    """Devices the fabric listed on `node` (attaching, attached, detaching) from `since` (time.time()) on that its
    first answer then did not list there (an earlier holder's), within `among` where given (identified entries: the
    scenario's leased devices; count-based: a node the scenario has to itself)."""
    samples = probe.samples(since)
    before = {d for d, (n, _) in samples[0].states.items() if n == node} if samples else set()
    found = set(first_listed(probe, node, since)) - before
    return sorted(found if among is None else found & among)


def unattached_until(probe: Recorder, device: str, node: str, since: float) -> float | None:
    """The sending time of the fabric's last answer, from `since` (time.time()) on, that did NOT show `device`
    attached to `node` before its first answer that did (the last answer of all if none did): the fabric's own state
    at or after that moment said not attached. None if the probe gave no such answer."""
    last = None
    for sample in probe.samples(since):
        if sample.states.get(device) == (node, "attached"):
            return last
        last = sample.sent
    return last


def unbacked_conditions(ctx: Context, history: History, unattached: dict[str, float | None]) -> list[str]:
    """Binding conditions a claim of the namespace showed True while the fabric still said THAT device was not
    attached: seen True (watch delivery, after the write) at least one probe period before the sending of a probe
    answer that did not show it attached (`unattached`: device -> unattached_until; the period: a probe may lag the
    fabric). Whatever the probe's pace: an answer describes the fabric at a moment at or after its sending, so
    nothing is assumed about the time between answers. Each device
    of a claim on its own; an entry that names no device (a count entry without status data) is compared with the
    earliest of them (no device of the claim was attached then)."""
    known = [at for at in unattached.values() if at is not None]
    earliest = min(known) if known else None
    attribute = ctx.profile.identity_attribute
    found = []
    for event in history.events("claim"):
        claim = event.obj
        for result in allocation_results(claim):
            ident = ctx.identity(result["pool"], result["device"]) or data_identity(claim, result, attribute)
            until = unattached.get(ident, earliest) if ident else earliest
            if until is None or event.at + PROBE_PERIOD_S > until:  # a period's grace: a probe may lag the fabric
                continue
            wanted = set(result.get("bindingConditions") or ())
            for type_, status in device_conditions(claim, result).items():
                if type_ in wanted and status == "True":
                    name = claim["metadata"]["name"]
                    device = f"{result.get('pool')}/{result.get('device')}" + (f" ({ident})" if ident else "")
                    found.append(
                        f"claim {name} r{event.revision} {device}: {type_} True at {event.at:.3f}, but the fabric's "
                        f"answer sent at {until:.3f} still did not show it attached"
                    )
    return found
