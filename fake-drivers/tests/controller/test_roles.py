"""--role: three reconcilers (publisher, attacher, conditions) split the work and coordinate only through a shared
(fake) cluster and fabric; each survives its own restart at any step. Fakes for the API and the fabric, no cluster:
the real-cluster proof is the suite on fixtures/profiles/reference-roles.yaml."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from test_decide import KEEP, claim_obj, dev

from fake_drivers.controller.decide import Attach, ConditionWrite, Detach, Plan, TaintCreate
from fake_drivers.controller.fabric import Outcome
from fake_drivers.controller.metrics import Metrics
from fake_drivers.controller.model import Claim, FabricDevice
from fake_drivers.controller.objects import taint_rule, with_condition
from fake_drivers.controller.reconciler import Caches, Reconciler
from fake_drivers.controller.roles import Role, share
from fake_drivers.controller.settings import Purpose

SPLIT = (Role.PUBLISHER, Role.ATTACHER, Role.CONDITIONS)


def full_plan() -> Plan:
    claim = Claim.from_api(claim_obj())
    result = claim.results[0]
    return Plan(
        pools={"fabric-0": [dev(0)]},
        create_taints=[TaintCreate(p, "u", "d") for p in Purpose],
        delete_taints=["old"],
        conditions=[ConditionWrite(claim, result, "t", "r", "m")],
        attaches=[Attach("u", "node-0", "ns/c")],
        detaches=[Detach("u", "node-0", recheck=True)],
    )


def test_every_part_of_a_plan_is_done_by_exactly_one_role() -> None:
    plan = full_plan()
    for f in fields(Plan):
        if f.name in ("idle_since", "states"):
            continue
        whole = getattr(plan, f.name)
        parts = [getattr(share(plan, role), f.name) for role in SPLIT]
        owners = [role for role, part in zip(SPLIT, parts, strict=True) if part]
        if f.name == "create_taints":  # quarantine rules: the attacher (only it saw the refusal); the rest: publisher
            assert [t.purpose for t in parts[1]] == [Purpose.QUARANTINE]
            assert sorted(t.purpose for t in parts[0]) == sorted(p for p in Purpose if p is not Purpose.QUARANTINE)
            assert not parts[2]
        elif whole:
            assert len(owners) == 1, (f.name, owners)
    assert share(plan, Role.ALL) is plan
    assert [r for r in Role if r.removes_on_stop] == [Role.ALL, Role.PUBLISHER]


@dataclass
class World:
    """The shared cluster (claims, taint rules) and fabric the three roles see."""

    claims: list[dict[str, Any]]
    devices: dict[str, FabricDevice]
    taints: list[dict[str, Any]] = field(default_factory=list)
    fail_next_attach: bool = False
    writes: list[tuple[Role, str]] = field(default_factory=list)  # (role, what) in order
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class WorldCache:
    world: World
    kind: str
    synced: threading.Event = field(default_factory=threading.Event)

    def items(self) -> list[dict[str, Any]]:
        return list(getattr(self.world, self.kind)) if self.kind != "slices" else []


@dataclass
class WorldKube:
    world: World
    role: Role

    def list_claims(self) -> list[dict[str, Any]]:
        return list(self.world.claims)

    def node_names(self) -> frozenset[str]:  # unknown nodes: every node counts as existing
        raise ApiException(status=403, reason="Forbidden")

    def sync_pool(self, fabric: str, devices: list[Any], cached: Any) -> int | None:
        self.world.writes.append((self.role, f"pool {fabric}"))
        return None

    def create_taint(self, taint: TaintCreate, now: float) -> bool:
        obj = taint_rule(KEEP, taint, now)
        with self.world.lock:
            if all(t["metadata"]["name"] != obj["metadata"]["name"] for t in self.world.taints):
                self.world.taints.append(obj)
        self.world.writes.append((self.role, f"taint {taint.purpose.value}"))
        return True

    def delete_taint(self, name: str) -> None:
        self.world.taints[:] = [t for t in self.world.taints if t["metadata"]["name"] != name]
        self.world.writes.append((self.role, "delete taint"))

    def write_condition(self, write: ConditionWrite, now: float, cached: Any = None) -> str:
        index = next(i for i, c in enumerate(self.world.claims) if c["metadata"]["name"] == write.claim.name)
        body = with_condition(self.world.claims[index], write, now)
        if body is None:
            return "unchanged"
        self.world.claims[index] = body
        self.world.writes.append((self.role, write.type.split("/")[1]))
        return "written"


@dataclass
class WorldFabric:
    world: World
    role: Role

    def devices(self) -> list[FabricDevice]:
        return list(self.world.devices.values())

    def _set(self, uuid: str, state: str, node: str | None) -> None:
        d = self.world.devices[uuid]
        self.world.devices[uuid] = FabricDevice(d.uuid, d.name, d.fabric, d.model, d.attributes, state, node)

    def attach(self, uuid: str, node: str) -> Outcome:
        self.world.writes.append((self.role, "fabric attach"))
        if self.world.fail_next_attach:
            self.world.fail_next_attach = False
            return Outcome(ok=False, failed=True, error="attach_failed", reason="FabricLinkDown", message="link lost")
        self._set(uuid, "attached", node)
        return Outcome(ok=True)

    def detach(self, uuid: str, node: str | None) -> Outcome:
        self.world.writes.append((self.role, "fabric detach"))
        self._set(uuid, "free", None)
        return Outcome(ok=True)


def start(world: World, role: Role) -> Reconciler:
    """A (re)started role: a new process knows nothing but what the cluster and the fabric show."""
    r = Reconciler(KEEP, WorldKube(world, role), WorldFabric(world, role), Metrics(), poll_s=0.05, role=role)  # type: ignore[arg-type]
    r.caches = Caches(WorldCache(world, "claims"), WorldCache(world, "slices"), WorldCache(world, "taints"))  # type: ignore[arg-type]
    return r


def settle(r: Reconciler) -> None:
    """One pass, then wait for the fabric operations it started (they run in the reconciler's workers)."""
    r.reconcile_once()
    deadline = time.monotonic() + 5
    while r._inflight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not r._inflight, f"{r.role}: operations still in flight after 5 s: {r._inflight}"


def condition(world: World, type_: str) -> str | None:
    claim = Claim.from_api(world.claims[0])
    return claim.condition(claim.results[0], f"{KEEP.driver}/{type_}")


def run_until(
    world: World, roles: dict[Role, Reconciler], done: Any, restart: Role | None = None, passes: int = 6
) -> None:
    """Rounds of one pass per role; `restart` is replaced by a new process before the second round."""
    for n in range(passes):
        for role in SPLIT:
            if restart is role and n == 1:
                roles[role] = start(world, role)
            settle(roles[role])
        if done():
            return
    raise AssertionError(f"not done after {passes} rounds; writes: {world.writes}")


@pytest.mark.parametrize("restart", [None, *SPLIT])
def test_split_roles_attach_then_report_each_doing_only_its_part(restart: Role | None) -> None:
    world = World([claim_obj()], {d.uuid: d for d in [dev(0)]})
    roles = {role: start(world, role) for role in SPLIT}
    run_until(world, roles, lambda: condition(world, "attached") == "True", restart)
    device = world.devices["uuid-fabric-0-0"]
    assert (device.state, device.node) == ("attached", "node-0")
    first_report = world.writes.index((Role.CONDITIONS, "attached"))
    assert world.writes.index((Role.ATTACHER, "fabric attach")) < first_report
    by_role = {role: {w for r, w in world.writes if r is role} for role in SPLIT}
    assert by_role[Role.ATTACHER] <= {"fabric attach"}
    assert by_role[Role.CONDITIONS] == {"attached"}
    assert by_role[Role.PUBLISHER] <= {"pool fabric-0"}


def test_the_condition_writer_reports_nothing_while_the_fabric_has_not_attached() -> None:
    world = World([claim_obj()], {d.uuid: d for d in [dev(0)]})
    conditions = start(world, Role.CONDITIONS)
    for _ in range(3):
        settle(conditions)
    assert condition(world, "attached") is None and world.writes == []


@pytest.mark.parametrize("restart", [None, Role.PUBLISHER, Role.CONDITIONS])
def test_a_refused_attach_reaches_the_condition_writer_through_the_quarantine_rule(restart: Role | None) -> None:
    world = World([claim_obj()], {d.uuid: d for d in [dev(0)]}, fail_next_attach=True)
    roles = {role: start(world, role) for role in SPLIT}
    run_until(world, roles, lambda: condition(world, "attach-failed") == "True", restart)
    quarantine = world.writes.index((Role.ATTACHER, "taint quarantine"))
    assert quarantine < world.writes.index((Role.CONDITIONS, "attach-failed"))  # hidden before the claim is told
    assert condition(world, "attached") is None
    claim = world.claims[0]["status"]["devices"][0]["conditions"]
    assert [(c["reason"], c["message"]) for c in claim] == [("FabricLinkDown", "link lost")]


def test_an_attacher_restarted_before_it_recorded_a_refusal_attaches_again() -> None:
    """The refusal lived only in the killed attacher (as in the single controller): the device is free in the
    fabric, so the new attacher attaches it again, and the claim is reported once that attach is done."""
    world = World([claim_obj()], {d.uuid: d for d in [dev(0)]}, fail_next_attach=True)
    attacher = start(world, Role.ATTACHER)
    settle(attacher)  # the attach is refused; killed before the next pass writes the quarantine rule
    roles = {role: start(world, role) for role in SPLIT}
    run_until(world, roles, lambda: condition(world, "attached") == "True")
    assert [w for r, w in world.writes if r is Role.ATTACHER] == ["fabric attach", "fabric attach"]
    assert condition(world, "attach-failed") is None


@pytest.mark.parametrize("restart", [None, *SPLIT])
def test_a_released_device_is_hidden_by_the_publisher_detached_by_the_attacher_then_offered(
    restart: Role | None,
) -> None:
    world = World([], {d.uuid: d for d in [dev(0, "attached", "node-0")]})
    roles = {role: start(world, role) for role in SPLIT}  # fresh: a device nobody holds is past its grace

    def offered_again() -> bool:
        return world.devices["uuid-fabric-0-0"].state == "free" and not world.taints

    for role in SPLIT:
        settle(roles[role])
    for t in world.taints:  # the detach rule has settled
        t["metadata"]["annotations"]["reference-controller.fake-drivers.example.com/since"] = "0"
    run_until(world, roles, offered_again, restart)
    said = [(r, w) for r, w in world.writes if w != "pool fabric-0"]
    hide, offer = (Role.PUBLISHER, "taint detach"), (Role.PUBLISHER, "delete taint")
    assert said == [hide, (Role.ATTACHER, "fabric detach"), offer]
