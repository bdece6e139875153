"""IMP-8's restart between every two steps of the detach and failure paths (restart_grid.py PATHS): how each such cell
is held at its step, what the role must come back to, and what it owes afterwards. Every step is read from what any
implementation shows (the fabric probe, the slices and DeviceTaintRules in the record, the claim's conditions, the
fault injector's record of the operations it refused or held), never from the reference's internals; every hold is the
fault injector's or a guard the suite controls (conformance/cluster/reportguard.py):

- detach path: `released-guarded` every detach of the released device refused (an `unreachable` fault on it) until the
  role is back: the stack has tried the detach, and hidden the device first if it guards a detach (said, not
  required: keep-in-pool may keep an idle device offered); `released-detached` the detach held in flight and let
  complete while a process role is down; `released-offered` detached and offered again before the restart, and
  never attached again after it;
- failure path: the claim is given one of two devices and the attach of the one picked fails (and every later attach
  of it): `failed-seen` the attach held and let fail while a process role is down; `failed-hidden` the failure report
  refused by the report guard until the role is back, the device out of offer before the kill; `failed-reported` the
  role restarted as soon as the record shows the failure condition True. Each owes: the failure reported, the failed
  device out of offer from the report until the pod bound elsewhere and never attached again for the claim once the
  stack had acted on the failure, the pod bound on the other device (the quarantine is judged up to that binding).
"""

from __future__ import annotations

import time
from typing import Any

from conformance.cluster.manifests import pinned_pod
from conformance.cluster.reportguard import ReportGuard
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.observe import quarantine
from conformance.observe.attachments import SKEW_S, stamp
from conformance.observe.devices import FAILED
from conformance.observe.recorder import PROBE_PERIOD_S
from conformance.observe.views import SCHEDULE_S, Allocation
from conformance.suite.implementation.context import Context
from conformance.suite.implementation.outcome import bind_timeout, follow, outcome
from conformance.suite.implementation.restart_staging import Staged, held_since, wait_probe
from conformance.suite.implementation.settle import LetGo, delete_pod, let_go

DETACH_STEPS = ("released-guarded", "released-detached", "released-offered")
FAILURE_STEPS = ("failed-seen", "failed-hidden", "failed-reported")
REASON = "ConformanceInjectedFailure"
MESSAGE = "conformance scenario restart: attach refused"
FAIL_ATTEMPTS = 3  # every attach of the failed device fails (a restarted stack may retry one whose outcome it lost)
REFUSED = 1_000_000  # an `unreachable` fault refuses every detach of the device until disarmed


# --- the detach path ---------------------------------------------------------------------------------------------


def hold_detach(ctx: Context, s: Staged) -> None:
    """A bound cell of the detach path from its pod's release up to its kill point (after restart_staging.bound_first:
    its pod bound on its node, the device known; released-detached's held detach is released-detaching's, there)."""
    cell, device, node = s.seen.cell, s.seen.device, s.seen.node
    detach: dict[str, Any] = {"node": node} if ctx.counted else {"device": device}
    promise = ctx.profile.promises.detach_s
    if cell == "released-guarded":
        s.fault = s.faults.arm("unreachable", count=REFUSED, **detach)
        delete_pod(ctx, s.ns, s.history)
        s.released = time.monotonic()
        wait_for(
            lambda: s.faults.hits(s.fault),
            bool,
            timeout=promise,
            expected=f"the stack to try the detach of {device} from {node} (the unreachable fault to refuse it)",
            interval=PROBE_PERIOD_S,
            max_interval=4 * PROBE_PERIOD_S,
        )
        s.held_from = held_since(s)
        if ctx.invariants is not None and not ctx.counted:
            offered = ctx.invariants.in_offer(device, node)
            s.seen.notes.append(f"guard at the kill: {'none, offered by ' + ', '.join(offered) if offered else 'made'}")
    elif cell == "released-offered":
        delete_pod(ctx, s.ns, s.history)
        s.released = time.monotonic()
        first = let_go(ctx, [device], s.lease, s.released, promise)
        if problem := first.problem():
            s.seen.walked = f"the device was not let go before the restart: {problem}"


def detached_while_down(ctx: Context, s: Staged) -> None:
    """released-detached, between kill and start: the held detach let complete, seen free by the probe."""
    s.faults.release_fault(s.fault)
    s.let_on = time.monotonic()
    device = s.seen.device
    wait_probe(ctx, device, lambda st: st is None, ctx.profile.promises.detach_s, f"{device} detached (role down)")


def offered_after(ctx: Context, s: Staged, killed: float, back: float) -> None:
    """released-offered after the restart: no probe answer lists the device on its node from the kill until the
    promised attach time after the restart (a restarted stack acts within it)."""
    probe = ctx.probe
    assert probe is not None
    until = back + ctx.profile.promises.attach_s
    probe.after(until, timeout=ctx.profile.promises.attach_s + 10)
    device, node = s.seen.device, s.seen.node
    for x in probe.samples(killed):
        if x.sent > until:
            break
        on_node = (st for st in x.states.values() if st[0] == node)
        where = next(on_node, None) if ctx.counted else x.states.get(device)
        if where is not None:
            s.seen.problems.append(
                f"{device} {where[1]} on {where[0]} again after the restart (the probe's answer sent {stamp(x.sent)}; "
                f"the restart ended {stamp(back)}): detached and offered before it, nothing owed it an attach"
            )
            return


HELD_DETACH = ("released-detaching", "released-guarded", "released-detached", "move-detaching-a")
RELEASED_WHILE_DOWN = ("released-attached", "move-attached-a")


def note_held_back(ctx: Context, s: Staged, back_mono: float) -> None:
    """Tell the run-wide record how long the suite held a released device's way out back: its detach held refused or
    hung (from the injector's first hit until let go, or until the role was back), or the device released while the
    suite had the role down (from the release until the role was back: nothing could act on it). IMP-12's deadline
    there is the stack's, without it."""
    offset = time.time() - time.monotonic()
    cell = s.seen.cell
    if cell in HELD_DETACH and s.held_from:
        start, until = s.held_from, back_mono if cell == "released-detached" else (s.let_on or back_mono)
    elif cell in RELEASED_WHILE_DOWN and (s.released or s.began):
        start, until = s.released or s.began - offset, back_mono  # `began` (a move's A released) is time.time()
    else:
        return
    for device in {s.seen.device} - {""}:
        ctx.record.hold_back(device, start + offset, until + offset)


def let_go_window(s: Staged, back_mono: float) -> tuple[float, float]:
    """(counted from, held back) of a detach-path cell's let-go: the suite held its detach refused or in flight, and
    the role down after a detach it let complete, then the role offers the device again."""
    if s.seen.cell == "released-guarded":
        return s.released, max(0.0, s.let_on - s.held_from)
    if s.seen.cell == "released-detached":
        return s.released, max(0.0, back_mono - s.held_from)
    return back_mono, 0.0  # released-offered: offered before the restart; judged again from its end


def after_restart(s: Staged) -> None:
    """What a path cell's hold becomes once the role is back: the refused detach allowed, the report guard lifted (a
    detach or an attach held in flight was let go while the role was down)."""
    if s.seen.cell == "released-guarded" and s.fault:
        s.faults.disarm(s.fault)
        s.ended, s.let_on = time.time(), time.monotonic()
    elif s.seen.cell == "failed-hidden" and s.guard is not None:
        s.guard.lift()
        s.ended = time.time()


def walked(ctx: Context, s: Staged, killed: float, came: float) -> str:
    """A path cell's own marks besides its claim and fabric at the kill (AT_KILL): why it was not walked ("": it was).
    `came`: when the role was started (a process role; a command role: the kill)."""
    probe = ctx.probe
    assert probe is not None
    device, cell = s.seen.device, s.seen.cell
    if cell in ("released-detached", "failed-seen") and probe.after(came).get(device) is not None:
        return f"{device} was still {probe.after(came)[device][1]} on the fabric when {s.seen.role} was started"
    reports = [
        (a, f) for a in s.history.allocations() for f in _meaning_failure(ctx, a) if f["revision"] and a.at <= killed
    ]
    said = [f for a, f in reports if _at(s, int(f["revision"])) <= killed]
    if cell == "failed-hidden" and said:
        return f"the failure was reported before the kill (revision {said[0]['revision']}): the guard did not hold it"
    if cell == "failed-reported":
        if not said:
            return "no failure condition meaning failure was True before the kill"
        binding = s.history.binding()
        if binding is not None and binding.at <= killed:
            return f"the pod was bound again before the kill (revision {binding.revision})"
    return ""


def _at(s: Staged, revision: int) -> float:
    """When the record received the namespace's write of `revision`."""
    return next((e.at for e in s.history.events("claim") if e.revision == revision), float("inf"))


# --- the failure path --------------------------------------------------------------------------------------------


def _meaning_failure(ctx: Context, allocation: Allocation) -> list[dict[str, Any]]:
    return [f for f in allocation.failures if ctx.profile.meaning(f["type"]) == "failure"]


def _first_failed(ctx: Context, s: Staged, armed: dict[str, str], timeout: float, what: str) -> str:
    """The leased device the claim's attach went to (its fault hit first); the other's fault disarmed before the
    scheduler can reallocate to it (it must go through)."""
    expected = f"the attach of one of {sorted(armed)} to {s.seen.node} ({what})"
    hit = s.faults.first_hit(armed, timeout=timeout, expected=expected, interval=PROBE_PERIOD_S)
    for d, f in armed.items():
        if d != hit and s.faults.disarm(f) is None:
            raise AssertionError(f"the fault on {d} was used before the suite could disarm it: {s.history.describe()}")
    ctx.pool.note(hit, FAILED)  # a later lease may take it on purpose once offered again
    s.seen.device = hit
    s.seen.notes.append(f"failed device {hit}")
    return hit


def hold_failures(ctx: Context, staged: list[Staged]) -> None:
    """The failure path's cells up to their kill points, side by side (the bindingTimeout runs from each allocation):
    the report guard in force first, then every pod; failed-seen's attach held, failed-hidden's report refused with the
    device out of offer, then (last: the restart follows at once) failed-reported's report seen."""
    order = {name: i for i, name in enumerate(FAILURE_STEPS)}
    staged = sorted(staged, key=lambda x: order[x.seen.cell])
    armed = {}
    for s in staged:
        if s.seen.cell == "failed-hidden":
            reschedule = tuple(t for t, m in ctx.profile.failure_conditions.items() if m == "reschedule")
            s.guard = ReportGuard(ctx.cluster, ctx.objects, s.ns, reschedule)
            s.guard.hold()
    for s in staged:
        hang = s.seen.cell == "failed-seen"
        how: dict[str, Any] = {"count": 1} if hang else {"count": FAIL_ATTEMPTS, "reason": REASON, "message": MESSAGE}
        armed[s.seen.cell] = {d: s.faults.arm("hang" if hang else "fail", d, **how) for d in s.lease.identities}
        ctx.objects.create(pinned_pod("app", "gpu", s.seen.node), s.ns)
    for s in staged:
        _hold_failure(ctx, s, armed[s.seen.cell])


def _hold_failure(ctx: Context, s: Staged, armed: dict[str, str]) -> None:
    cell, node = s.seen.cell, s.seen.node
    timeout = bind_timeout(ctx.profile)
    failed = _first_failed(ctx, s, armed, timeout, "held" if cell == "failed-seen" else "made to fail")
    s.fault, s.began = armed[failed], time.time()
    if cell == "failed-seen":
        wait_probe(ctx, failed, lambda st: st is not None, timeout, f"the held attach of {failed} listed")
    elif cell == "failed-hidden":
        watcher = ctx.invariants
        assert watcher is not None
        try:
            wait_for(
                lambda: watcher.in_offer(failed, node),
                lambda offered: not offered,
                timeout=ctx.profile.promises.attach_s + SCHEDULE_S,
                expected=f"the failed device {failed} out of offer on {node} while its failure report is held",
            )
        except WaitTimeout as exc:
            s.seen.walked = f"the stack did not take the failed device out of offer while its report was held: {exc}"
    else:
        s.history.wait(
            lambda h: next((a for a in h.allocations() if _meaning_failure(ctx, a)), None),
            timeout=ctx.profile.promises.attach_s + SCHEDULE_S,
            expected=f"a failure condition meaning failure True for {failed}",
        )


def failed_while_down(ctx: Context, s: Staged) -> None:
    """failed-seen, between kill and start: every later attach of the device armed to fail, then its held attach let
    fail; the probe shows it free before the role starts."""
    device = s.seen.device
    s.fault_after = s.faults.arm("fail", device, count=FAIL_ATTEMPTS, reason=REASON, message=MESSAGE)
    s.faults.release_fault(s.fault, "fail", reason=REASON, message=MESSAGE)
    s.let_on = time.monotonic()
    wait_probe(ctx, device, lambda st: st is None, ctx.profile.promises.attach_s, f"the failed attach of {device} over")


def _not_retried(ctx: Context, s: Staged, first: Allocation, back: float) -> str:
    """failed-seen: the attach that failed while the role was down is the restarted stack's to find, by trying it again
    or by reporting it, within attachSeconds of its start while the allocation stands ("": it did)."""
    probe, failed = ctx.probe, s.seen.device
    until = back + ctx.profile.promises.attach_s
    if probe is None or (first.cleared_at is not None and first.cleared_at < until):
        return ""
    tried = next((x.sent for x in probe.samples(back) if x.sent <= until and failed in x.states), None)
    reported = [f for f in _meaning_failure(ctx, first) if _at(s, int(f["revision"])) <= until]
    if tried is not None or reported:
        return ""
    return (
        f"the failed attach of {failed} was lost across the restart: from the restart's end ({stamp(back)}) to "
        f"attachSeconds after it the stack neither tried it again (the probe never listed it) nor reported it, "
        f"while its allocation r{first.revision} stood"
    )


def report_owed(first: Allocation, owed_until: float) -> bool:
    """Whether a failure cell's report was owed: it is, within attachSeconds of the moment the suite let it through
    (the report guard lifted, else the restart's end: `owed_until` is that plus attachSeconds), for as long as the
    allocation that held the failed device stands. What the suite held excuses no more than that: an allocation the
    binding timeout cleared before then is owed nothing. The clearing is known as the claim stream delivered it,
    which may lag the write: one delivered within the streams' skew after `owed_until` may have come before it."""
    return first.cleared_at is None or first.cleared_at - SKEW_S >= owed_until


def judge_failure(ctx: Context, s: Staged, killed: float, back: float) -> None:
    """What a failure cell owes after the restart (the module's docstring), into seen.problems; then every fault of
    the cell disarmed (the pod's device is let go as any cell's)."""
    seen, failed, node = s.seen, s.seen.device, s.seen.node
    seen.held_s = round(s.ended - s.began, 3)
    needed = seen.held_s + ctx.profile.promises.attach_s + PREBIND_POLL_S
    seen.timeout_expected = needed >= seen.binding_timeout_s
    timeout = bind_timeout(ctx.profile, SCHEDULE_S) + seen.held_s + seen.binding_timeout_s
    try:
        seen.outcome = follow(ctx, s.history, node, timeout)
    except WaitTimeout as exc:
        seen.outcome, seen.unbound = outcome(ctx, s.history, node), str(exc)
    # The quarantine owed lasts until the pod was bound elsewhere (else until now): not until the suite came to judge
    # this cell, which follows the other cells of the batch (a broken role's 60 s binding timeouts in them once
    # stretched it past the reference's 60 s quarantine, and its due return read as "came back after the restart").
    cleared = seen.outcome.binding.at if seen.outcome.binding is not None else time.time()
    allocations = seen.outcome.allocations
    first = next((a for a in allocations if failed in {seen.outcome.identity_in(a, d) for d in a.devices}), None)
    reported = [(a, f) for a in allocations for f in _meaning_failure(ctx, a)]
    if first is None:
        seen.problems.append(f"no allocation of the claim held the failed device {failed}: {seen.outcome.describe()}")
        return
    owed_until = max(back, s.ended) + ctx.profile.promises.attach_s
    if not reported and not report_owed(first, owed_until):
        seen.notes.append(
            f"not reported: the allocation r{first.revision} was cleared at {stamp(first.cleared_at)}, before "
            f"attachSeconds after the suite let the report through ({stamp(owed_until)}): what it held reaches that"
        )
    elif not reported:
        seen.problems.append(
            f"the failure of {failed} was never reported: no failure condition meaning failure True on any allocation "
            f"of the claim, though r{first.revision} stood past attachSeconds after the suite let the report through "
            f"({stamp(owed_until)})\n  {seen.outcome.describe()}"
        )
    else:
        f = reported[0][1]
        records = ctx.record.select()
        at = min(_at(s, int(f["revision"])), cleared)
        q = quarantine.Quarantine(failed, node, int(f["revision"]), at, cleared)
        identities, attribute = ctx.record.identities(), ctx.profile.identity_attribute
        returned = quarantine.judge(records, ctx.record.samples(), q, ctx.profile.driver, attribute, identities)
        if returned:
            seen.problems.append(f"{q}; the failed device came back after the restart:\n  " + "\n  ".join(returned))
        if seen.cell != "failed-seen" and ctx.probe is not None:  # the stack had acted on the failure before the kill
            again = [x for x in ctx.probe.samples(killed) if x.sent < at and (x.states.get(failed) or ("", ""))[0]]
            if again:
                st, sent = again[0].states[failed], stamp(again[0].sent)
                seen.problems.append(
                    f"{failed} {st[1]} on {st[0]} again after the restart (the probe's answer sent {sent}, before the "
                    f"report at revision {f['revision']}): the failure it had acted on was lost"
                )
    if seen.cell == "failed-seen" and (lost := _not_retried(ctx, s, first, back)):
        seen.problems.insert(0, lost)
    failed_at = first.revision
    seen.problems += seen.outcome.binding_problems(timeouts=seen.timeout_expected, failed=failed_at)
    if failed in {i for i in seen.outcome.final_identities() if i}:
        seen.problems.append(f"the pod was bound with the failed device {failed}")
    for fault in list(s.faults.armed):
        s.faults.disarm(fault)


def used_devices(s: Staged) -> list[str]:
    """The devices a failure cell's let-go owes: the pod's (the failed one stays out of offer as the stack decides)."""
    seen = s.seen.outcome
    return sorted({i for i in (seen.final_identities() if seen else []) if i})


def failure_let_go(ctx: Context, s: Staged) -> LetGo:
    used = used_devices(s) or [d for d in s.lease.identities if d != s.seen.device]
    return let_go(ctx, used, s.lease, s.released, ctx.profile.promises.detach_s)
