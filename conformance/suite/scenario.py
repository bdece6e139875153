"""Scenarios: a record (name, description, requirements, what the implementation must offer) plus a function.

In the spirit of the Gateway API conformance suite. A scenario drives the cluster and the implementation and
returns what it observed; the tests of its module assert one requirement each on that observation. Scenarios
run side by side in threads, each in its own namespaces and with its own leased devices, so the suite takes
about as long as its longest scenario; a failure or skip of a scenario becomes the outcome of each of its tests.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from conformance.cluster.client import USER_AGENT, Cluster
from conformance.cluster.manifests import RESOURCE_API, claim_template
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.providers.base import ClusterInfo, NodeSpec
from conformance.cluster.waits import WaitTimeout, wait_for
from conformance.implementation.harness import Implementation
from conformance.implementation.profile import Profile
from conformance.observe.devices import DevicePool, Kind, Lease, fabric_only_nodes
from conformance.observe.invariants import SCHEDULER_FAULT, InvariantWatcher
from conformance.observe.publishing import PublishLog, count_shortfall
from conformance.observe.reach import explain, label_changes, selector_keys
from conformance.observe.recorder import Recorder
from conformance.observe.views import History
from conformance.suite.exclusive import ExclusiveGate
from conformance.suite.known import for_holders

if TYPE_CHECKING:
    from conformance.suite.others import OtherDrivers

T = TypeVar("T")
SCENARIO_DEADLINE_S = 900.0
NAMESPACE_READY_S = 30.0


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    requirements: tuple[str, ...]
    run: Callable[[Context], Any]
    module: str
    capabilities: tuple[str, ...] = ()  # profile capabilities it needs (skipped without them)
    probe: bool = False  # needs the profile's fabricProbe
    faults: bool = False  # needs the profile's faultInjector
    # False: certifies the cluster with suite-owned drivers (runs with --profile none; gets a ClusterContext)
    implementation: bool = True
    controller: tuple[str, ...] = ()  # controller fields of the profile it needs ("process", "serviceAccount")
    exclusive: bool = False  # runs alone: it disturbs the shared implementation (restarts it), or must not be disturbed
    # Requirements of the scenario that only the fabric probe can judge (the scenario itself runs without one): they
    # are skipped, and predicted skipped by `profile check`, where the profile declares no fabricProbe.
    probe_for: tuple[str, ...] = ()
    # The same for the readiness probe (bindingModel node-local): requirements judged on what it says is ready.
    readiness_for: tuple[str, ...] = ()
    # Needs a node without node-local devices reached by a fabric pool: the device read waits for one (publishing.py).
    remote: bool = True


REGISTRY: dict[str, Scenario] = {}
# Capabilities a scenario reads in its body (not through `capabilities=`), registered by `reads_capability`: with the
# scenarios' own, every capability a profile may claim (`profile check` refuses one that nothing reads).
READ_CAPABILITIES: set[str] = set()


def reads_capability(name: str) -> str:
    """Register a capability a scenario reads in its body; returns the name."""
    READ_CAPABILITIES.add(name)
    return name


def known_capabilities() -> set[str]:
    """Every capability some registered scenario reads."""
    return {c for s in REGISTRY.values() for c in s.capabilities} | READ_CAPABILITIES


def scenario(
    name: str,
    description: str,
    requirements: tuple[str, ...],
    *,
    capabilities: tuple[str, ...] = (),
    probe: bool = False,
    faults: bool = False,
    implementation: bool = True,
    controller: tuple[str, ...] = (),
    exclusive: bool = False,
    probe_for: tuple[str, ...] = (),
    remote: bool = True,
    readiness_for: tuple[str, ...] = (),
) -> Callable[[Callable[[Any], T]], Callable[[Any], T]]:
    """Register a scenario function; the module's tests read its result with `result_fixture`. A scenario with
    implementation=False gets a ClusterContext (no profile, no implementation, no leased devices)."""

    def register(fn: Callable[[Any], T]) -> Callable[[Any], T]:
        if name in REGISTRY and REGISTRY[name].module != fn.__module__:
            raise ValueError(f"scenario {name!r} is defined twice ({REGISTRY[name].module}, {fn.__module__})")
        REGISTRY[name] = Scenario(
            name,
            description,
            requirements,
            fn,
            fn.__module__,
            capabilities,
            probe,
            faults,
            implementation,
            controller,
            exclusive,
            probe_for,
            readiness_for,
            remote,
        )
        return fn

    return register


def profile_gap(sc: Scenario, profile: Profile, requirement: str | None = None) -> str | None:
    """Why an implementation scenario (or, given `requirement`, that requirement of it) cannot be judged with this
    profile (its skip reason), or None. Shared by the runner, the tests (requirement_gap) and `dra-conformance
    profile check`, so the check predicts exactly what a run will skip for the profile."""
    if requirement in sc.readiness_for and profile.readiness_probe is None:
        return f"the profile declares no readinessProbe: {requirement} is judged on what it says is ready"
    if requirement in sc.probe_for and profile.fabric_probe is None:
        return f"the profile declares no fabricProbe: {requirement} is judged on what the fabric says is attached"
    missing = [c for c in sc.capabilities if not profile.capabilities.get(c)]
    if missing:
        return f"the profile does not claim the capabilities {missing}"
    if sc.probe and profile.fabric_probe is None:
        return "the profile declares no fabricProbe: attachments cannot be observed"
    if sc.faults and profile.fault_injector is None:
        return "the profile declares no faultInjector: failures cannot be caused"
    if "process" in sc.controller and not profile.restartable():
        return "the profile names no restartable role (roles, or controller.process): the suite cannot restart any"
    if "serviceAccount" in sc.controller and not profile.accounts():
        return (
            "the profile names no ServiceAccount (serviceAccounts, controller.serviceAccount, or a process run with "
            "{sa_kubeconfig:...}): the stack's privileges are unknown"
        )
    return None


def profile_needs(sc: Scenario, requirement: str | None = None) -> list[str]:
    """What an implementation scenario (or `requirement` of it) needs from a profile, in words (the requirement
    reference, docs/): the fields profile_gap reads, so what the reference says skips a scenario is what skips it."""
    needs = [f"a `fabricProbe` (for {requirement})"] if requirement in sc.probe_for else []
    needs += [f"a `readinessProbe` (for {requirement})"] if requirement in sc.readiness_for else []
    needs += [f"the capability `{c}`" for c in sc.capabilities]
    needs += ["a `fabricProbe`"] if sc.probe else []
    needs += ["a `faultInjector`"] if sc.faults else []
    needs += ["a restartable role (`roles` or `controller.process`)"] if "process" in sc.controller else []
    account = "a ServiceAccount (`serviceAccounts`, `controller.serviceAccount`, or `{sa_kubeconfig:...}` of a process)"
    needs += [account] if "serviceAccount" in sc.controller else []
    return needs


def skip_for_profile(scenario: str, requirement: str, profile: Profile) -> None:
    """A test of `requirement` fed by `scenario`: skipped for what the profile does not offer (profile_gap)."""
    if reason := profile_gap(REGISTRY[scenario], profile, requirement):
        pytest.skip(reason)


class ImplementationOwes(AssertionError):
    """The implementation had not published what it owes (devices, reach) within promises.publishSeconds of its
    readiness: the scenario cannot start, and fails with the cause in the first line of its message."""


@dataclass(frozen=True)
class ScenarioFailed:
    """What a test receives instead of the observation when its scenario failed; the plugin raises `error` when
    the test runs, so each test of the scenario is FAILED with the scenario's evidence (not a setup ERROR)."""

    error: Exception


def skip_if_binding_timeout_fixed(info: ClusterInfo) -> None:
    """Scenarios that wait for the scheduler's binding timeout cannot wait out a fixed one (1.34: 600 s)."""
    if not info.binding_timeout_configurable:
        pytest.skip(
            f"Kubernetes {info.version} fixes the binding timeout at {info.binding_timeout_s}s: too long to wait"
        )


def result_fixture(fixture: str, name: str) -> Any:
    """A module fixture `fixture` that hands the tests of a module the observation of scenario `name`.
    A skip of the scenario skips the tests; a failure fails each of them (see ScenarioFailed)."""

    @pytest.fixture(scope="module", name=fixture)
    def observed(request: pytest.FixtureRequest) -> Any:
        # Cluster scenarios run on their own runner: they need no implementation and do not wait for it.
        runner: ScenarioRunner = request.getfixturevalue(
            "scenarios" if REGISTRY[name].implementation else "cluster_scenarios"
        )
        try:
            return runner.result(name)
        except Exception as exc:  # skips and interrupts are BaseExceptions: they pass through
            return ScenarioFailed(exc)

    return observed


class InvariantViolated(AssertionError):
    """An invariant watched during the scenario broke; the message lists when and which objects."""


@dataclass(kw_only=True)
class ClusterContext:
    """What a scenario works with: its own API client (threads do not share one), objects and namespaces."""

    scenario: Scenario
    cluster: Cluster
    objects: ObjectTracker
    say: Callable[[str], None]
    record: Recorder  # the run-wide record: what scenarios observe is read from it
    namespaces: set[str] = field(default_factory=set)
    measurements: dict[str, list[float]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # run options scenarios read (e.g. scale_pods)

    def namespace(self, prefix: str | None = None) -> str:
        """A fresh namespace of this scenario with its default ServiceAccount ready."""
        base = re.sub(r"[^a-z0-9-]+", "-", (prefix or self.scenario.name).lower()).strip("-")[:40]
        ns = self.objects.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": f"{base}-"}})
        name = ns.metadata.name
        self.namespaces.add(name)
        wait_for(
            lambda: self.cluster.core.read_namespaced_service_account("default", name),
            bool,
            timeout=NAMESPACE_READY_S,
            expected=f"ServiceAccount {name}/default (created by kube-controller-manager)",
        )
        return name

    def history(self, namespace: str) -> History:
        """The claims and pods of one of the scenario's namespaces, as the run-wide record holds them."""
        return History(self.record, namespace)

    def measure(self, key: str, value: float) -> None:
        self.measurements.setdefault(key, []).append(value)

    def requirements_missing(self) -> str | None:
        """Why this scenario cannot run here (the runner skips it with this reason), or None."""
        return None

    def failure_notes(self) -> str:
        """What a failure message adds at its end (Context: the implementation's log lines of that moment)."""
        return ""

    def release(self) -> None:
        """Give back what the scenario held (devices), once its objects are gone."""

    @property
    def identities(self) -> set[str]:
        """Physical devices of the implementation this scenario used (none for cluster scenarios)."""
        return set()


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
    ) -> Lease:
        """`count` devices of `kind` reaching `node`. Count-based fabric pools are leased by capacity (pool, model,
        count) on `node` or the first of a list of nodes with room (of `model`, if given); `exclusive` keeps the node
        to this scenario (faults selected by node). `part`: a part of the scenario that holds its lease apart from the
        others (its own node, where exclusive), for a scenario that stages several steps side by side. Fewer fabric
        devices published than the profile declares (`published`) are waited for up to the promise, then fail; a
        scenario that needs more than the profile declares is skipped (the pool's lease says why)."""
        holder = f"{self.scenario.name}/{part}" if part else self.scenario.name
        self.refresh()
        if kind == "fabric" and self.pool.count("fabric") < count:
            self._owed_devices(count)
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
            lease = self.pool.lease(holder, count, kind, node[0] if isinstance(node, list) else node)
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
        raise ImplementationOwes(
            f"the implementation did not publish {what} within promises.publishSeconds={promise:g} of its readiness"
            f"{now}: {cause()}\n" + "\n".join(self._published_when())
        )

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

    def failure_notes(self) -> str:
        """The implementation's own log lines written while the scenario ran (where the suite started it), and where
        its whole logs are in the reports."""
        written = self.implementation.log_since(self.log_marks)
        if not written:
            return ""
        lines = [
            "the implementation's log lines: what it said went wrong, and what it wrote while the scenario ran (whole "
            "logs: artefacts/implementation/ in the reports folder, linked from the HTML report):"
        ]
        for name, found in written.items():
            lines += [f"  [{name}] {line}" for line in found]
        return "\n".join(lines)

    def release(self) -> None:
        for lease in self.leases:
            self.pool.release(lease)

    @property
    def identities(self) -> set[str]:
        """Leased physical devices, and "pool/model" of count-based leases (the watcher's offered-above-free)."""
        counted = {f"{lease.counted.pool}/{lease.counted.model}" for lease in self.leases if lease.counted}
        return {i for lease in self.leases for i in lease.identities} | counted


@dataclass
class Timing:
    start: float
    end: float | None = None
    outcome: str = "running"


class ScenarioRunner:
    """Starts the selected scenarios at once and hands their results to the tests."""

    def __init__(
        self,
        scenarios: list[Scenario],
        make_context: Callable[[Scenario], ClusterContext],
        invariants: InvariantWatcher | None,
        say: Callable[[str], None],
        concurrency: int | None = None,
    ) -> None:
        self.scenarios = {s.name: s for s in scenarios}
        # The profile's fabricConcurrency: at most this many implementation scenarios at once (a stack that
        # attaches one device at a time would otherwise stall every scenario behind one hung attach).
        self.concurrency = concurrency
        self._slots = threading.BoundedSemaphore(concurrency) if concurrency else None
        self._gate = ExclusiveGate(sum(1 for s in scenarios if s.implementation and s.exclusive))
        self._make_context = make_context
        self._invariants = invariants
        self._say = say
        self._executor = ThreadPoolExecutor(max_workers=max(1, len(scenarios)), thread_name_prefix="scenario")
        self._futures: dict[str, Future[Any]] = {}
        self.timings: dict[str, Timing] = {}
        self.measurements: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.scenarios:
            bound = f" (at most {self.concurrency} at once: the profile's fabricConcurrency)" if self._slots else ""
            self._say(f"starting {len(self.scenarios)} scenarios side by side{bound}: {', '.join(self.scenarios)}")
        for sc in self.scenarios.values():
            self._futures[sc.name] = self._executor.submit(self._run, sc)

    def result(self, name: str) -> Any:
        """The scenario's observation; re-raises its failure or skip in the calling test."""
        if name not in self._futures:
            raise KeyError(f"scenario {name!r} was not selected in this run (known: {sorted(self._futures)})")
        return self._futures[name].result(timeout=SCENARIO_DEADLINE_S)

    def finished(self, name: str) -> Any | None:
        """The observation of scenario `name` if it ran and ended without an error, else None (for the reports)."""
        future = self._futures.get(name)
        if future is None or not future.done() or future.cancelled() or future.exception() is not None:
            return None
        return future.result()

    def _run(self, sc: Scenario) -> Any:
        if not sc.implementation:
            return self._run_now(sc)
        with self._gate.alone() if sc.exclusive else self._gate.shared():
            if self._slots is None:
                return self._run_now(sc)
            with self._slots:
                return self._run_now(sc)

    def wall(self) -> float | None:
        """Seconds from the first scenario's start to the last one's end (None before all ended)."""
        ends = [t.end for t in self.timings.values()]
        if not ends or None in ends:
            return None
        return max(e for e in ends if e is not None) - min(t.start for t in self.timings.values())

    def _run_now(self, sc: Scenario) -> Any:
        timing = self.timings[sc.name] = Timing(time.time())
        ctx = self._make_context(sc)
        ctx.cluster.user_agent = f"{USER_AGENT}/{sc.name}"
        try:
            if reason := ctx.requirements_missing():
                pytest.skip(reason)
            try:
                result = sc.run(ctx)
            except AssertionError as exc:  # a wait ran out: what the watcher saw meanwhile is the evidence
                if notes := _notes(ctx):
                    exc.args = (f"{exc}\n{notes}",)  # the first line stays the cause
                self._check_invariants(sc, ctx, timing.start, failure=exc)
                raise
            self._check_invariants(sc, ctx, timing.start)
            timing.outcome = "passed"
            return result
        except pytest.skip.Exception:
            timing.outcome = "skipped"
            raise
        except BaseException:
            timing.outcome = "failed"
            raise
        finally:
            failures = ctx.objects.cleanup()
            ctx.release()
            with self._lock:
                for key, values in ctx.measurements.items():
                    self.measurements.setdefault(key, []).extend(values)
            ctx.cluster.close()
            timing.end = time.time()
            self._say(f"scenario {sc.name}: {timing.outcome} in {timing.end - timing.start:.1f}s")
            if failures:
                raise AssertionError(f"scenario {sc.name}: cleanup failed: {failures}")

    def _check_invariants(
        self, sc: Scenario, ctx: ClusterContext, start: float, failure: AssertionError | None = None
    ) -> None:
        if self._invariants is None:
            return
        broken = self._invariants.since(start, ctx.namespaces, ctx.identities)
        then = f"\nand then: {failure}" if failure else ""
        if any(v.what != SCHEDULER_FAULT for v in broken):
            raise InvariantViolated(
                f"scenario {sc.name}: invariants broken while it ran:\n" + "\n".join(f"  {v}" for v in broken) + then
            ) from failure
        if broken:  # the cluster's fault: what the implementation did after it cannot be judged (SCH-9 fails)
            known = for_holders(ctx.record, {o for v in broken for o in v.objects}, ctx.cluster.info)
            pytest.skip(
                f"scenario {sc.name}: not judged: kube-scheduler allocated one device to two claims while it ran "
                f"(SCH-9, the cluster's fault, not the implementation's{'; ' + known if known else ''}):\n"
                + "\n".join(f"  {v}" for v in broken)
                + then
            )

    def say(self, message: str) -> None:
        """A line of progress on the terminal (for what judges the scenarios after they ended)."""
        self._say(message)

    def wait_all(self) -> list[str]:
        """Wait until every scenario has ended (its cleanup included); the names of those that ran."""
        wait(self._futures.values(), timeout=SCENARIO_DEADLINE_S)
        return [name for name, t in self.timings.items() if t.outcome != "skipped"]

    def join(self) -> None:
        """Wait for every scenario (their cleanup runs in their threads), then stop the pool."""
        _, running = wait(self._futures.values(), timeout=SCENARIO_DEADLINE_S)
        if running:
            stuck = [name for name, f in self._futures.items() if f in running]
            raise AssertionError(f"scenarios still running after {SCENARIO_DEADLINE_S:g}s: {stuck}")
        self._executor.shutdown(wait=True)
        if (wall := self.wall()) is not None and self._slots:
            self._say(f"{len(self.timings)} scenarios took {wall:.1f}s at most {self.concurrency} at once")


def _notes(ctx: ClusterContext) -> str:
    """The context's failure notes; never a reason for a second failure."""
    try:
        return ctx.failure_notes()
    except Exception as exc:  # a log that cannot be read must not hide the failure
        return f"(the implementation's log lines could not be read: {exc!r})"


def summarize(values: list[float]) -> dict[str, float]:
    """median, p95, min, max and count of a measured figure."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {
        "count": len(ordered),
        "median": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
    }
