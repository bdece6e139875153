"""What the decisions read and what they return: the snapshot and the controller's memory in, the plan and
its items out, and the device states the fabric manager reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import Claim, CountedEntry, FabricDevice, NodeCopy, Result, TaintRule
from ..settings import Purpose

FREE, ATTACHING, ATTACHED, DETACHING = "free", "attaching", "attached", "detaching"


@dataclass(frozen=True)
class Snapshot:
    devices: tuple[FabricDevice, ...]
    claims: tuple[Claim, ...]
    copies: tuple[NodeCopy, ...]
    taints: tuple[TaintRule, ...]
    # Names of the cluster's nodes; None when unknown (not read, or not allowed): every node counts as existing.
    nodes: frozenset[str] | None = None

    def node_gone(self, node: str | None) -> bool:
        """The node was deleted: no pod can use a device attached there again."""
        return self.nodes is not None and node is not None and node not in self.nodes


@dataclass(frozen=True)
class Failure:
    """An attach the fabric manager refused, until a quarantine rule records it in the cluster."""

    reason: str
    message: str
    at: float = 0.0  # time.time() when the fabric refused the attach


@dataclass(frozen=True)
class Memory:
    """What the controller knows that the cluster and the fabric do not show (all of it may be lost)."""

    inflight: Mapping[str, str] = field(default_factory=dict)  # uuid -> "attach" | "detach"
    failures: Mapping[str, Failure] = field(default_factory=dict)  # uuid -> failed attach
    idle_since: Mapping[str, float] = field(default_factory=dict)  # uuid -> when it was first seen unheld
    rescheduled: Mapping[str, int] = field(default_factory=dict)  # claim uid -> reschedules asked for
    # --broken-forget-*-on-restart only: (uuid, claim uid) of work found at start, never done ("": a detach).
    forgotten: frozenset[tuple[str, str]] = frozenset()
    # counted: assignments written to claims the watch cache may not show yet
    assigned: Mapping[AssignmentKey, str] = field(default_factory=dict)
    # --broken-report-on-fabric-error only: uuid -> node of the last attach the fabric answered with an error
    errored: Mapping[str, str] = field(default_factory=dict)
    # The first pass after a (re)start: idle timers were lost with the old process, and a device found attached with
    # nobody holding it was released before the restart at the latest, so its grace is over (a restart must not
    # postpone a detach past the promise; the detach guard and the recheck still protect a device claimed meanwhile).
    fresh: bool = False


# (claim uid, allocationTimestamp, (driver, pool, device)): one allocation of a count entry. A claim reallocated to
# the same entry name gets a new timestamp, so an old assignment never carries over.
AssignmentKey = tuple[str, str, tuple[str, str, str]]


@dataclass(frozen=True)
class ConditionWrite:
    claim: Claim
    result: Result
    type: str
    reason: str
    message: str
    uuid: str = ""  # the physical device, so an attach failure can be forgotten once reported


@dataclass(frozen=True)
class Assignment:
    """counted: the physical device a count entry gets, written to the claim before the attach."""

    claim: Claim
    result: Result
    uuid: str


@dataclass(frozen=True)
class TaintCreate:
    purpose: Purpose
    uuid: str
    device: str
    reason: str | None = None
    message: str | None = None
    until: float | None = None


@dataclass(frozen=True)
class Attach:
    uuid: str
    node: str
    claim: str
    # reschedule-to-local: the hold rule must exist before the device is attached (its copy appears then).
    needs_hold: bool = False


@dataclass(frozen=True)
class Detach:
    uuid: str
    node: str | None
    # Idle devices: re-read the claims right before detaching (an allocation may have landed meanwhile).
    recheck: bool


@dataclass
class Plan:
    pools: dict[str, list[FabricDevice | CountedEntry]] = field(default_factory=dict)
    assignments: list[Assignment] = field(default_factory=list)
    create_taints: list[TaintCreate] = field(default_factory=list)
    delete_taints: list[str] = field(default_factory=list)
    conditions: list[ConditionWrite] = field(default_factory=list)
    attaches: list[Attach] = field(default_factory=list)
    detaches: list[Detach] = field(default_factory=list)
    idle_since: dict[str, float] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # "device x" / "claim ns/n pool/dev" -> state, for logs
