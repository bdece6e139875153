"""IMP-17 (MUST): the implementation ignores ResourceClaims, ResourceSlices and DeviceClasses of other drivers.

Judged in the coexistence phase (suite/phases.py), the only implementation scenario in it: the suite's cluster
scenarios keep claims of their own drivers live, and another driver lives beside the implementation (suite/others.py):
its class, its slice, and claims with binding conditions pending, allocated and waiting, timed out and failed. This
scenario
waits until the record has shown each of those states, then runs an attach-before-bind of the implementation's own
device WHILE they exist: its pod must bind on the node the scenario chose, through the implementation (attached
there, where the profile has a probe; for a node-local readiness gate, with devices of its node's own slices). Then
it reads what the implementation did to the other driver's objects: the
slice and class unchanged since the suite created them, no condition, data or deletion on the claims the suite did
not write, no field manager but the suite's and the control plane's.

What fails it: a stack that aborts its reconcile on a claim it does not know (its own pod never binds: the failure's
first line says so, with the other driver's claims live at that moment, and quotes the implementation's log lines),
one that writes conditions or data on another driver's claim, one that republishes, deletes or edits another
driver's slice or class. Judged alike for every binding model: only the implementation's own claim and the other
driver's objects are read. Every other implementation requirement is judged afterwards, in the foreign-free phase, so
a stack that breaks here fails IMP-17 with that cause and still gets its other gaps reported on their own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cluster.audit import audit_log
from conformance.cluster.client import Cluster
from conformance.cluster.manifests import pinned_pod
from conformance.cluster.versions import PREBIND_POLL_S
from conformance.observe.views import SCHEDULE_S
from conformance.suite.cause import NO_DEALINGS, SYMPTOM_LABEL, Dealings, Evidence, gather, is_wait_symptom
from conformance.suite.implementation.outcome import Outcome, follow
from conformance.suite.implementation.start import own_devices
from conformance.suite.others import STATES, OtherDrivers
from conformance.suite.ownpools import annotate, whose
from conformance.suite.phases import COEXISTENCE
from conformance.suite.scenario import Context, ImplementationOwes, ScenarioRunner, result_fixture, scenario


@dataclass
class Coexistence:
    driver: str  # the other driver
    states: dict[str, float] = field(default_factory=dict)  # state -> when first seen
    live: dict[str, str] = field(default_factory=dict)  # the other claims' states as the own pod was followed
    flow: Outcome | None = None
    writes: list[str] = field(default_factory=list)  # writes to the other driver's objects not by the suite

    def others(self) -> str:
        shown = ", ".join(f"{name}: {state}" for name, state in sorted(self.live.items())) or "none recorded"
        return f"claims of driver {self.driver} with binding conditions ({shown})"


@scenario(
    "coexistence",
    "another driver's class, slice and claims in every binding state are live; the implementation attaches (or, "
    "node-local, readies) and reports its own claim and never writes theirs",
    ("IMP-17",),
    beside_others=True,
)
def coexistence(ctx: Context) -> Coexistence:
    others = ctx.others
    if others is None or others.unavailable:
        raise AssertionError(
            "the other driver's objects are not live, so coexistence cannot be shown: "
            + (others.unavailable if others else "the run made none")
        )
    seen = Coexistence(others.driver)
    # Every state at least once before the own pod (timed-out takes one binding timeout from the objects' creation).
    bound = ctx.cluster.info.binding_timeout_s + 2 * PREBIND_POLL_S + SCHEDULE_S
    seen.states = others.wait_states(bound)
    ctx.say(f"other driver's states seen: {sorted(seen.states)}; now the implementation's own claim")
    seen.live = others.live_claims()
    began = time.time()
    try:
        node, _, ns = own_devices(ctx)
        with ctx.history(ns) as history:
            ctx.objects.create(pinned_pod("app", "gpu", node), ns)
            seen.flow = follow(ctx, history, node)
    except (ImplementationOwes, AssertionError) as exc:
        seen.live = others.live_claims() or seen.live
        raise AssertionError(_failure(ctx, others, seen, str(exc), began)) from exc
    seen.live = others.live_claims() or seen.live
    seen.writes = others.foreign_writes(ctx.cluster)
    return seen


# What the own claim did not get, in the binding model's words (a node-local gate readies, a fabric stack attaches).
NOT_SERVED = {
    "keep-in-pool": "was not attached with its binding conditions set",
    "reschedule-to-local": "was not attached and moved onto its device's node-local copy",
    "counted": "got no device of its model attached and was not moved onto the node-local copy",
    "node-local": "was not readied with its binding conditions set",
}


def _failure(ctx: Context, others: OtherDrivers, seen: Coexistence, message: str, since: float) -> str:
    """The failure's message: on its first line what the implementation did with the other drivers' objects (the
    suite's evidence: its writes to them, its refused requests on them, its log lines naming them), then what its own
    claim did not get and the record's story of it; the wait's symptom on the next line."""
    first, _, rest = message.partition("\n")
    dealt = dealings(ctx, others)
    try:
        evidence = gather(ctx, since, namespaces=set(ctx.namespaces))
    except Exception as exc:  # evidence that cannot be read must not hide the failure
        evidence = Evidence(audit=f"(the own claim's evidence could not be read: {exc!r})")
    model = "counted" if ctx.counted else ctx.profile.binding_model
    own = f"its own claim {NOT_SERVED.get(model, NOT_SERVED['keep-in-pool'])}"
    symptom = is_wait_symptom(first)
    if cause := dealt.cause():  # the own claim's story beside it; its other evidence follows in the details
        head = f"IMP-17: {cause}; {own}" + (f": {evidence.story}" if evidence.story else "")
    else:
        told = evidence.cause() if symptom else ""
        head = f"IMP-17: {own} beside another driver's claims: {told or first}; {NO_DEALINGS}"
    logged = ctx.suite_names_logged()  # what it tripped over: the suite's own pools, not its own
    lines = [head]
    lines += [f"its log lines name the suite's own pools or drivers: {logged}"] if logged else []
    lines += [f"{SYMPTOM_LABEL}{first}" if symptom else first, f"while {seen.others()} were live"]
    if dealt.lines:  # what it logged about them, each name it quotes followed by whose it is
        lines += [
            "the implementation's log lines that name other drivers' objects:",
            *annotate(dealt.lines[:5], dealt.names),
        ]
    lines += [rest] if rest else []
    return "\n".join(lines)


def dealings(ctx: Context, others: OtherDrivers) -> Dealings:
    """What the suite's evidence shows the implementation did with other drivers' objects since it started (they were
    live from its start: the cluster scenarios' claims and the other driver's): its writes to the other driver's
    objects, its requests the API server refused on other drivers' claims and slices, and its log lines (whole logs)
    that name them. Never a reason for a second failure."""
    found = Dealings(names=ctx.suite_names())
    foreign: set[str] = set()  # other drivers' slices (cluster-scoped)
    for r in ctx.record.select(("claim", "slice")):
        if r.kind == "slice":
            if (r.obj.get("driver") or "") not in ("", ctx.profile.driver):
                foreign.add(r.name)
            continue
        allocation = (r.obj.get("status") or {}).get("allocation") or {}
        drivers = {x.get("driver") for x in (allocation.get("devices") or {}).get("results") or []}
        for driver in drivers - {ctx.profile.driver, None}:
            found.spaces.setdefault(r.namespace, f"claims of driver {driver} ({whose(driver)})")
    if others.namespace:
        found.spaces[others.namespace] = f"claims of driver {others.driver} ({whose(others.driver)})"
    try:
        found.writes = others.foreign_writes(ctx.cluster)
    except Exception as exc:  # the API could not be read: said beside the log lines
        found.lines.append(f"(the other driver's objects could not be read: {exc!r})")
    log = audit_log(ctx.cluster.info.audit_log)
    if log is not None:
        accounts = ctx.stack_accounts() or None
        found.refusals = [
            r
            for r in log.refusals(ctx.record.started, accounts=accounts)
            if (r.namespace and r.namespace in found.spaces) or (not r.namespace and r.name in foreign)
        ]
    written = ctx.implementation.log_since({}, [*found.spaces, *found.names], lines=20)
    found.lines += [f"  [{name}] {line}" for name, lines in written.items() for line in lines if found.about(line)]
    return found


observed = result_fixture("coexist", "coexistence")


@pytest.mark.requirement("IMP-17")
def test_the_own_claim_is_attached_and_reported_beside_other_drivers_claims(
    coexist: Coexistence, record_property: Any
) -> None:
    record_property("other_driver_states_seen", ",".join(sorted(coexist.states)))
    missing = [s for s in STATES if s not in coexist.states]
    if missing:
        record_property("other_driver_states_not_seen", ",".join(missing))
    flow = coexist.flow
    assert flow is not None and flow.binding is not None, f"IMP-17: the own pod did not bind beside {coexist.others()}"
    if flow.model == "node-local":  # no fabric: bound where its own node-local devices are
        problems, what = flow.placement_problems(), "bound with its node's own devices"
    else:
        problems, what = (flow.binding_problems() if flow.probed else []), "attached where it bound"
    assert not problems, (
        f"IMP-17: beside {coexist.others()}, the own claim was not {what}: {problems[0]}\n"
        + "\n".join(problems[1:])
        + f"\n  {flow.describe()}"
    )


@pytest.mark.requirement("IMP-17")
def test_other_drivers_objects_are_never_written(coexist: Coexistence) -> None:
    assert not coexist.writes, (
        f"IMP-17: the implementation wrote objects of another driver ({coexist.driver}): {coexist.writes[0]}\n"
        + "\n".join(coexist.writes[1:])
    )


@pytest.mark.run_wide
@pytest.mark.phase(COEXISTENCE)
@pytest.mark.requirement("IMP-17")
def test_other_drivers_objects_were_never_written_all_run_long(
    scenarios: ScenarioRunner, other_driver: OtherDrivers, cluster: Cluster
) -> None:
    """The same evidence at the end of the coexistence phase (read just before the other driver's objects were
    deleted): the other driver lived from the implementation's readiness until then."""
    scenarios.wait_all()
    if other_driver.unavailable:
        pytest.fail(f"IMP-17: the other driver's objects were not live: {other_driver.unavailable}")
    writes = other_driver.final_writes
    if writes is None:  # the phase never ended (an interrupted run): read them now
        writes = other_driver.foreign_writes(cluster)
    assert not writes, (
        f"IMP-17: while the other driver was live (until the coexistence phase ended), the implementation wrote "
        f"objects of another driver ({other_driver.driver}): {writes[0]}\n" + "\n".join(writes[1:])
    )
