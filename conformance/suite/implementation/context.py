"""An implementation scenario's context: the implementation, its profile, the leased devices and what the
implementation owes (published devices and reach, waited for up to its promise; else ImplementationOwes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import pytest

from conformance.cluster.manifests import RESOURCE_API, claim_template
from conformance.cluster.providers.base import NodeSpec
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.harness import Implementation
from conformance.implementation.harness.process import LOUD
from conformance.implementation.profile import Profile
from conformance.observe.devices import DevicePool, Kind, Lease, fabric_only_nodes
from conformance.observe.invariants import InvariantWatcher
from conformance.observe.publishing import PublishLog, count_shortfall
from conformance.observe.reach import explain, label_changes, selector_keys, shortfalls
from conformance.observe.recorder import Recorder
from conformance.suite.context import NAMESPACE_READY_S, ClusterContext
from conformance.suite.gaps import profile_gap
from conformance.suite.implementation.needs import central_rights_missing
from conformance.suite.ownpools import annotate, mentioned, suite_names, summary

if TYPE_CHECKING:
    from conformance.suite.others import OtherDrivers

T = TypeVar("T")


class ImplementationOwes(AssertionError):
    """The implementation had not published what it owes (devices, reach) within promises.publishSeconds of its
    readiness: the scenario cannot start, and fails with the cause in the first line of its message."""


@dataclass(kw_only=True)
class Context(ClusterContext):
    """An implementation scenario's context: also the implementation, its profile and the leased devices."""

    implementation: Implementation
    profile: Profile
    pool: DevicePool
    leases: list[Lease] = field(default_factory=list)
    # The session's invariant watcher, for scenarios that check it observed their critical window (IMP-6).
    invariants: InvariantWatcher | None = None
    # Nodes the scenario added for itself (IMP-16), tainted so that no other scenario's pod lands there: live_nodes()
    # leaves them out, so they are added here for this scenario's own leases and reach.
    own_nodes: list[str] = field(default_factory=list)
    # What the implementation published and when (the device read's log): the promise scenarios wait for.
    publish: PublishLog | None = None
    # Other drivers' objects live through the implementation phase (suite/others.py), for the coexistence scenario.
    others: OtherDrivers | None = None
    log_marks: dict[str, int] = field(default_factory=dict)  # where the implementation's logs ended at its start
    _classes: int = 0

    @property
    def probe(self) -> Recorder | None:
        """The run's fabric probe samples (in the record); None where the profile declares no probe."""
        return self.record if self.record.probed else None

    def nodes(self) -> list[NodeSpec]:
        """Schedulable nodes with their labels as they are now (watched), not as the cluster created them, and the
        nodes this scenario added for itself."""
        live = self.invariants.live_nodes() if self.invariants else list(self.cluster.info.nodes)
        names = {n.name for n in live}
        current = {n["metadata"]["name"]: n for n in self.record.live("node")}  # labels as they are now
        own = [n for n in self.own_nodes if n in current and n not in names]
        return live + [NodeSpec(n, dict(current[n]["metadata"].get("labels") or {})) for n in own]

    @property
    def counted(self) -> bool:
        """The implementation's fabric entries are count-based (capacity per model, no physical identity)."""
        return self.profile.fabric_entries == "counted"

    def refresh(self) -> None:
        """Re-read the devices' reach from the slices and nodes as they are now."""
        if self.invariants is not None:
            self.pool.refresh(self.invariants.driver_slices(), self.nodes(), counted=self.counted)

    def lease(
        self,
        count: int,
        kind: Kind = "fabric",
        node: str | list[str] | None = None,
        *,
        exclusive: bool = False,
        part: str = "",
        model: str | None = None,
        prefer: tuple[str, ...] = (),
    ) -> Lease:
        """`count` devices of `kind` reaching `node`. Count-based fabric pools are leased by capacity (pool, model,
        count) on `node` or the first of a list of nodes with room (of `model`, if given); `exclusive` keeps the node
        to this scenario (faults selected by node). `part`: a part of the scenario that holds its lease apart from the
        others (its own node, where exclusive), for a scenario that stages several steps side by side. Fewer fabric
        devices published than the profile declares (`published`) are waited for up to the promise, then fail; a
        scenario that needs more than the profile declares is skipped (the pool's lease says why). `prefer`: devices
        leased on purpose for what they went through (observe/devices.py FAILED, MOVED, RELEASED; not count-based)."""
        holder = f"{self.scenario.name}/{part}" if part else self.scenario.name
        self.refresh()
        if kind == "fabric" and self.pool.count("fabric") < count:
            self._owed_devices(count)
        if kind == "fabric" and self.profile.has_fabric and self.pool.count("fabric") >= count:
            self._owed_reach(count, node)
        if kind == "fabric" and self.counted:
            nodes = (
                [node]
                if isinstance(node, str)
                else node or sorted({n for c in self.pool.counted.values() for n in c.nodes})
            )
            lease = self.pool.lease_counted(holder, count, nodes, exclusive=exclusive, model=model)
            if exclusive and self.invariants is not None and lease.node:
                self.leases.append(lease)  # released with the scenario even if the wait below fails
                # A class of the model also matches an attached copy left on the node by an earlier scenario: the
                # pod would take it and no attach (hence no fault) would happen. Wait until none is there, free or
                # held: the earlier holder's claim may be deallocated right after this check (soak round 9 of
                # 2026-12-04: attach-failure ended 0.01 s before its claim was; the next holder's pod took the copy).
                watcher, where = self.invariants, lease.node
                wait_for(
                    lambda: watcher.copies_on(where),
                    lambda left: not left,
                    timeout=self.profile.promises.detach_s + NAMESPACE_READY_S,
                    expected=f"no node-local copy left on {where} by an earlier scenario (this one needs an attach)",
                )
                return lease
        else:
            lease = self.pool.lease(holder, count, kind, node[0] if isinstance(node, list) else node, prefer=prefer)
        self.leases.append(lease)
        return lease

    def identity(self, pool: str, device: str) -> str | None:
        """The physical device behind a published copy: from the leases, else from any slice of the run."""
        for lease in self.leases:
            for d in lease.devices:
                if (pool, device) in d.copies:
                    return d.identity
        return self.invariants.identity_of(pool, device) if self.invariants else None

    def device_class(self, *leases: Lease, narrower: str = "") -> str:
        """A DeviceClass matching exactly the leased physical devices (every copy of them); `narrower`: a CEL term
        and-ed to that (e.g. only the copies that carry the identity attribute)."""
        self._classes += 1
        name = f"{self.scenario.name}-{self.objects.run_id}-{self._classes}"
        models = {lease.counted.model for lease in leases if lease.counted}
        if models and len(models) == len(leases) == 1:
            selector = self.pool.model_selector(models.pop())
        elif models:
            raise ValueError(f"a device class takes one count-based lease, got {len(leases)} of models {models}")
        else:
            selector = self.pool.selector([i for lease in leases for i in lease.identities])
        selector += f" && {narrower}" if narrower else ""
        self.objects.create(
            {
                "apiVersion": RESOURCE_API,
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": selector}}]},
            }
        )
        return name

    def remote_fabric(
        self, count: int = 1, template: str = "gpu", *, exclusive: bool = False, part: str = ""
    ) -> tuple[str, Lease, str]:
        """The usual start of a fabric scenario: a node without node-local devices (skip if there is none), a lease
        of `count` fabric devices reaching it, and a fresh namespace with a claim template for exactly those.
        Count-based pools: capacity on one of those nodes (`exclusive`: the node is this scenario's alone, or this
        `part`'s: see lease)."""
        nodes = self.remote_nodes(count)
        lease = self.lease(count, "fabric", nodes if self.counted else nodes[0], exclusive=exclusive, part=part)
        node = lease.node or nodes[0]
        ns = self.namespace(f"{self.scenario.name}-{part}" if part else None)
        self.objects.create(claim_template(template, self.device_class(lease)), ns)
        return node, lease, ns

    def fabric_only_nodes(self, count: int = 1) -> list[str]:
        """Nodes as they are now without node-local devices of the driver, reached by `count` fabric devices."""
        self.refresh()
        return fabric_only_nodes(self.pool, self.nodes(), count)

    def remote_nodes(self, count: int = 1, nodes: Callable[[], list[str]] | None = None) -> list[str]:
        """Nodes without node-local devices reached by `count` fabric devices (or what `nodes` finds), which the
        implementation owes: waited for up to its promise, then the scenario fails naming the pools and what each
        node lacks (ImplementationOwes)."""
        what = f"a node without node-local {self.profile.driver} devices reached by {count} fabric device(s)"
        return self.owed(what, nodes or (lambda: self.fabric_only_nodes(count)), self.reach_cause)

    def owed(self, what: str, found: Callable[[], T], cause: Callable[[], str]) -> T:
        """What the implementation owes, waited for until promises.publishSeconds after its readiness; then a failure
        whose first line says what was owed and why it is not there (`cause`), followed by what it published when."""
        deadline = self.publish.deadline if self.publish else time.time()
        try:
            return wait_for(found, bool, timeout=max(0.1, deadline - time.time()), expected=what, max_interval=1.0)
        except WaitTimeout:
            pass
        promise = self.profile.promises.publish_s
        now = f" (now {self.publish.rel(time.time())})" if self.publish else ""
        since = self.publish.counted_from() if self.publish else "of its readiness"
        raise ImplementationOwes(
            f"the implementation did not publish {what} within promises.publishSeconds={promise:g} {since}"
            f"{now}: {cause()}\n" + "\n".join(self._published_when())
        )

    def reach_owed(self, what: str, found: Callable[[], T | None], shape: Callable[[], str]) -> T:
        """Something a scenario needs of the fabric pools' reach (`found` returns it, or None): waited for on the owed
        path, up to the promise. Past it, a failure naming the pools and the labels nodes lack while the
        implementation still owes reach (a fabric pool reaching no Ready schedulable node, or no node without
        node-local devices reached: observe/reach.py); else, its reach all there, a skip saying what the fabric
        offers as published (`shape()`): the fabric's shape, not a gap of the implementation."""
        try:
            return self.owed(what, found, self.reach_cause)  # type: ignore[return-value]  # found: not None
        except ImplementationOwes:
            if self.reach_shortfalls():
                raise
        pytest.skip(f"{what}: not in this fabric's shape, though every fabric pool reaches its nodes: {shape()}")

    def reach_shortfalls(self) -> list[str]:
        """What the implementation owes in reach and has not published (empty: nothing; observe/reach.py)."""
        self.refresh()
        slices = self.invariants.driver_slices() if self.invariants else []
        local = {n for d in self.pool.devices.values() if d.kind == "local" for n in d.nodes}
        return shortfalls(slices, self.nodes(), local, need_remote=True) if self.profile.has_fabric else []

    def reach_cause(self) -> str:
        """Why no fabric pool reaches a node without node-local devices: each pool, its selector, its matches and
        what each node lacks (observe/reach.py), over the Ready schedulable nodes as they are now."""
        self.refresh()
        slices = self.invariants.driver_slices() if self.invariants else []
        local = {n for d in self.pool.devices.values() if d.kind == "local" for n in d.nodes}
        return explain(slices, self.nodes(), local)

    def _owed_devices(self, count: int) -> None:
        declared = self.profile.published
        if not (declared.declared and declared.fabric_devices >= count):
            return  # more than the profile declares: the pool's lease skips, saying so

        def cause() -> str:
            slices = self.invariants.driver_slices() if self.invariants else []
            return "; ".join(count_shortfall(slices, self.profile)) or f"{self.pool.count('fabric')} {kind}"

        kind = "fabric devices" if self.profile.has_fabric else "node-local devices with binding conditions"
        what = f"{count} {kind} (the profile's published declares {declared.fabric_devices})"
        self.owed(what, lambda: self.refresh() or self.pool.count("fabric") >= count, cause)

    def _owed_reach(self, count: int, node: str | list[str] | None) -> None:
        """The reach a lease needs, owed (reach_owed): `count` fabric devices (count-based: entries of one node's
        capacity) reaching `node` (a list: its first, or for count-based any of them; None: any Ready node)."""
        if isinstance(node, str):
            targets: list[str] | None = [node]
        else:
            targets = (node[:1] if not self.counted else node) if node else None

        def reached() -> bool | None:
            self.refresh()
            where = targets or [n.name for n in self.nodes()]
            if self.counted:
                return any(self.pool.count("fabric", n) >= count for n in where) or None
            devices = [d for d in self.pool.devices.values() if d.kind == "fabric" and d.nodes & set(where)]
            return len(devices) >= count or None

        def shape() -> str:
            where = targets or [n.name for n in self.nodes()]
            return "; ".join(f"{n}: {self.pool.count('fabric', n)} reach it" for n in where[:6])

        place = f"reaching {', '.join(targets)}" if targets else "reaching a Ready schedulable node"
        self.reach_owed(f"{count} fabric devices of {self.profile.driver} {place}", reached, shape)

    def _published_when(self) -> list[str]:
        """What the device read saw published when, and the changes of node labels the pools select on since the
        implementation's readiness (from the run-wide record)."""
        if self.publish is None:
            return []
        lines = [self.publish.describe()]
        keys = {k for s in (self.invariants.driver_slices() if self.invariants else []) for k in selector_keys(s)}
        changes = label_changes(self.record.select(("node",), since=self.publish.ready_at - 1), keys)
        if changes:
            lines.append("node labels the fabric pools select on, as they changed (seconds from its readiness):")
            lines += [f"  {self.publish.rel(at)} {text}" for at, text in changes[:20]]
        elif keys:
            lines.append(f"no node label of {sorted(keys)} changed since the implementation's readiness")
        return lines

    def requirements_missing(self) -> str | None:
        return profile_gap(self.scenario, self.profile)

    def stack_accounts(self) -> set[str] | None:
        return set(self.profile.accounts())

    def rights_missing(self) -> list[str]:
        """IMP-9's rule for a central writer (accountroles.central_missing), on the rights the API server's authorizer
        gives each account now (SubjectAccessReviews)."""
        return central_rights_missing(self.cluster, self.profile)

    def scenario_logs(self, since: float) -> tuple[str, str]:
        """The implementation's log lines written while the scenario ran that name its namespaces, claims or devices,
        or say something went wrong naming no other scenario's namespace (harness log_since), by process."""
        mine = set(self.namespaces)
        claims = {r.name for r in self.record.select(("claim",), since=since - 1) if r.namespace in mine}
        others = {r.namespace for r in self.record.select(("claim", "pod"), since=since - 1)} - mine - {""}
        written = self.implementation.log_since(self.log_marks, [*mine, *claims, *self.identities], others)
        if not written:
            return "", ""
        lines = [
            "the implementation's log lines about this scenario, by process, while it ran (whole logs: "
            "artefacts/implementation/ in the reports folder, linked from the HTML report):"
        ]
        names = self.suite_names()  # the suite's own pools and drivers, said as such wherever a line names them
        loud = ""
        for name, found in written.items():
            lines += annotate([f"  [{name}] {line}" for line in found], names)
            loud = loud or next((f"[{name}] {line.strip()[:300]}" for line in found if LOUD.search(line)), "")
        return loud, "\n".join(lines)

    def suite_names(self) -> dict[str, str]:
        """The suite's own drivers and pools of this run (ownpools.py), as the record's slices show them."""
        return suite_names((r.obj for r in self.record.select(("slice",))), self.profile.driver)

    def suite_names_logged(self) -> str:
        """The suite's own pools and drivers the implementation's log lines of this scenario name, and whose each is
        ("" if none): a cause a failure's second line can state."""
        names = self.suite_names()
        written = self.implementation.log_since(self.log_marks) if names else {}
        return summary(names, mentioned((line for found in written.values() for line in found), names))

    def release(self) -> None:
        for lease in self.leases:
            self.pool.release(lease)

    @property
    def identities(self) -> set[str]:
        """Leased physical devices, and "pool/model" of count-based leases (the watcher's offered-above-free)."""
        counted = {f"{lease.counted.pool}/{lease.counted.model}" for lease in self.leases if lease.counted}
        return {i for lease in self.leases for i in lease.identities} | counted
