"""Read-only views of what the decisions look at: fabric devices, claims, node-local copies, taint rules.

Parsed from the fabric manager's JSON and from plain Kubernetes dicts (resource.k8s.io/v1), so the decisions
never touch an API client and tests can build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..dra import IDENTITY_ATTRIBUTE, identity
from ..pools import current_pools
from .settings import DEVICE_LABEL, PURPOSE_LABEL, Purpose

# Annotations on a DeviceTaintRule: what the controller needs to carry on after a restart.
ANNOTATION_PREFIX = "reference-controller.fake-drivers.example.com/"
SINCE = ANNOTATION_PREFIX + "since"  # epoch seconds when the rule was made (settle timing)
UNTIL = ANNOTATION_PREFIX + "until"  # quarantine end, epoch seconds
REASON = ANNOTATION_PREFIX + "reason"  # the fabric's failure reason, copied into attach-failed
MESSAGE = ANNOTATION_PREFIX + "message"


@dataclass(frozen=True)
class FabricDevice:
    """One physical device as the fabric manager reports it."""

    uuid: str
    name: str
    fabric: str
    model: str
    attributes: dict[str, Any]
    state: str  # free | attaching | attached | detaching
    node: str | None  # attached node, or target/source of the operation in flight
    hung: bool = False
    # (claim uid, node): claims a node's driver prepared this device for and has not unprepared (the kubelet path).
    uses: tuple[tuple[str, str], ...] = ()

    def used_on(self, node: str | None) -> list[str]:
        """Claim uids the node still uses the device for (prepared, NodeUnprepareResources not called yet)."""
        return [claim for claim, where in self.uses if node is not None and where == node]

    @classmethod
    def from_api(cls, d: dict[str, Any]) -> FabricDevice:
        op = d.get("operation") or {}
        return cls(
            d["uuid"],
            d["name"],
            d["fabric"],
            d["model"],
            dict(d.get("attributes") or {}),
            d["state"],
            d.get("node"),
            bool(op.get("hung")),
            tuple((u["claim"], u["node"]) for u in d.get("uses") or []),
        )


@dataclass(frozen=True)
class CountedEntry:
    """An entry of a count-based fabric pool: capacity of one model, no physical identity."""

    name: str  # <model>-<index>
    fabric: str
    model: str
    attributes: dict[str, Any]


def entry_name(model: str, index: int) -> str:
    return f"{model}-{index}"


def entry_model(name: str) -> tuple[str, int] | None:
    """(model, index) of a count entry's name; None if it is not one."""
    model, _, index = name.rpartition("-")
    return (model, int(index)) if model and index.isdigit() else None


@dataclass(frozen=True)
class Result:
    """One allocated device of a claim (status.allocation.devices.results[])."""

    request: str
    driver: str
    pool: str
    device: str
    binding_conditions: tuple[str, ...]
    failure_conditions: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: str
    node: str | None  # the one node of allocation.nodeSelector (bindsToNode), if any
    allocated_at: str | None
    results: tuple[Result, ...]
    # (driver, pool, device) -> {condition type: status} of status.devices[]
    conditions: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)
    reserved_for: tuple[str, ...] = ()
    # (driver, pool, device) -> physical uuid in status.devices[].data: a count entry's device, once assigned
    assigned: dict[tuple[str, str, str], str] = field(default_factory=dict)
    deleting: bool = False  # metadata.deletionTimestamp set (a finalizer keeps it while a pod reserves it)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, result: Result, type_: str) -> str | None:
        return self.conditions.get(result.key, {}).get(type_)

    @classmethod
    def from_api(cls, obj: dict[str, Any]) -> Claim:
        meta, status = obj["metadata"], obj.get("status") or {}
        allocation = status.get("allocation") or {}
        results = tuple(
            Result(
                r.get("request", ""),
                r["driver"],
                r["pool"],
                r["device"],
                tuple(r.get("bindingConditions") or ()),
                tuple(r.get("bindingFailureConditions") or ()),
            )
            for r in (allocation.get("devices") or {}).get("results") or []
        )
        conditions = {
            (d["driver"], d["pool"], d["device"]): {c["type"]: c["status"] for c in d.get("conditions") or []}
            for d in status.get("devices") or []
        }
        assigned = {
            (d["driver"], d["pool"], d["device"]): str(uuid)
            for d in status.get("devices") or []
            if isinstance(d.get("data"), dict) and (uuid := d["data"].get(IDENTITY_ATTRIBUTE))
        }
        return cls(
            meta["namespace"],
            meta["name"],
            meta["uid"],
            int(meta.get("generation") or 0),
            meta.get("resourceVersion", ""),
            allocation_node(allocation),
            allocation.get("allocationTimestamp"),
            results,
            conditions,
            tuple(ref.get("name", "") for ref in status.get("reservedFor") or []),
            assigned,
            bool(meta.get("deletionTimestamp")),
        )


def allocation_node(allocation: dict[str, Any]) -> str | None:
    """The node of a bindsToNode allocation: nodeSelector = matchFields metadata.name In [node]."""
    terms = ((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms")) or []
    nodes = {
        value
        for term in terms
        for req in term.get("matchFields") or []
        if req.get("key") == "metadata.name" and req.get("operator") == "In"
        for value in req.get("values") or []
    }
    return nodes.pop() if len(nodes) == 1 else None


@dataclass(frozen=True)
class NodeCopy:
    """A device in a node-local slice of the driver (pool = node), with its physical identity."""

    node: str
    pool: str
    name: str
    uuid: str | None


def node_copies(slices: list[dict[str, Any]], driver: str) -> list[NodeCopy]:
    """Every device of the driver's node-local pools (slices with a nodeName), as the scheduler sees them.

    A pool may span several slices; only its newest generation counts (older slices are on their way out, and a
    device moved between slices of a pool would otherwise show up twice).
    """
    out = []
    for (slice_driver, _), pool in sorted(current_pools(slices).items()):
        node = pool.slices[0]["spec"].get("nodeName")
        if slice_driver != driver or not node:
            continue
        out += [NodeCopy(node, pool.name, device["name"], identity(device)) for device in pool.devices]
    return out


@dataclass(frozen=True)
class TaintRule:
    name: str
    purpose: Purpose
    uuid: str
    since: float
    until: float | None = None
    reason: str | None = None
    message: str | None = None

    @classmethod
    def from_api(cls, obj: dict[str, Any]) -> TaintRule | None:
        meta = obj["metadata"]
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        try:
            purpose = Purpose(labels.get(PURPOSE_LABEL, ""))
        except ValueError:
            return None
        return cls(
            meta["name"],
            purpose,
            labels.get(DEVICE_LABEL, ""),
            _float(notes.get(SINCE)) or 0.0,
            _float(notes.get(UNTIL)),
            notes.get(REASON),
            notes.get(MESSAGE),
        )


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
