"""The session fixtures behind the scenarios: the run-wide record, the implementation under test, and the runners
that start every selected scenario side by side."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import CANCELLED
from conformance.implementation.harness import Implementation, ImplementationFailed
from conformance.implementation.profile import LoadedProfile, ProfileError
from conformance.observe.devices import DevicePool, read_devices
from conformance.observe.invariants import InvariantWatcher
from conformance.observe.prebind_metrics import MetricsRun
from conformance.observe.publishing import PublishLog, settled_slices
from conformance.observe.recorder import Recorder
from conformance.session.shared import (
    CLUSTER_RUNNER_KEY,
    CLUSTER_TESTS_DONE_KEY,
    CRASHES_KEY,
    EVIDENCE_KEY,
    FOREIGN_FREE_KEY,
    OTHERS_KEY,
    PROFILE_KEY,
    READY_KEY,
    RUNNER_KEY,
    SELECTED_KEY,
    mark,
    progress,
)
from conformance.suite.others import OtherDrivers, other_drivers
from conformance.suite.phases import ForeignFree, Switch, foreign_claims
from conformance.suite.runner import SCENARIO_DEADLINE_S
from conformance.suite.scenario import ClusterContext, Context, Scenario, ScenarioRunner


@pytest.fixture(scope="session")
def recorder(
    cluster: Cluster, run_id: str, pytestconfig: pytest.Config, scheduler_metrics: MetricsRun
) -> Iterator[Recorder]:
    """The run-wide record (claims, the run's pods, slices, nodes, events, taint rules; the fabric probe once the
    implementation is up): timelines, failure snapshots and gathered objects are read from it. Every scenario runner
    needs it, so the window on kube-scheduler's metrics (SCH-10) opens before it, before any scenario."""
    loaded = pytestconfig.stash[PROFILE_KEY]
    rec = Recorder(Cluster(cluster.info), run_id, loaded.profile.identity_attribute if loaded else None).start()
    pytestconfig.stash[EVIDENCE_KEY].recorder = rec
    yield rec
    pytestconfig.stash[EVIDENCE_KEY].end()
    rec.stop()
    rec.cluster.close()


@pytest.fixture(scope="session")
def implementation(
    cluster: Cluster,
    profile: LoadedProfile,
    recorder: Recorder,
    pytestconfig: pytest.Config,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Implementation]:
    """The implementation under test, started from its profile against the session's cluster."""
    workdir = tmp_path_factory.mktemp("implementation")
    impl = Implementation(profile, cluster.info.kubeconfig, workdir, progress=progress(pytestconfig))
    evidence = pytestconfig.stash[EVIDENCE_KEY]
    try:
        impl.start()
    except (ImplementationFailed, ProfileError) as exc:
        evidence.gather_logs(workdir, "implementation", "implementation process logs")
        pytest.exit(f"cannot start the implementation of profile {profile.profile.name!r}: {exc}", returncode=3)
    mark(pytestconfig, "implementationReady")
    pytestconfig.stash[READY_KEY] = time.time()  # promises.publishSeconds counts from here
    if profile.profile.fabric_probe is not None:
        recorder.probe(impl.resolve(profile.profile.fabric_probe.url))
    yield impl
    evidence.end()  # the objects as the run left them, before the implementation removes its own
    recorder.stop_probe()
    problems = impl.stop()
    evidence.gather_logs(workdir, "implementation", "implementation process logs")
    if CANCELLED.is_set():  # interrupted: killing what did not stop in time is expected, not a finding
        return
    assert not problems, "the implementation did not stop cleanly:\n" + "\n".join(problems)


@pytest.fixture(scope="session")
def scenarios(
    cluster: Cluster,
    implementation: Implementation,
    profile: LoadedProfile,
    recorder: Recorder,
    run_id: str,
    pytestconfig: pytest.Config,
    request: pytest.FixtureRequest,
) -> Iterator[ScenarioRunner]:
    """Every selected scenario, started side by side once the implementation is up; tests read their results."""
    prof = profile.profile
    say = progress(pytestconfig)
    selected = [sc for sc in pytestconfig.stash.get(SELECTED_KEY, []) if sc.implementation]
    others = None
    if any(sc.beside_others for sc in selected):
        # Another driver's class, slice and claims in every binding state, live from now until the coexistence phase
        # ends (suite/others.py, suite/phases.py): the implementation works beside them, as in a real cluster (IMP-17).
        others = started = other_drivers(Cluster(cluster.info), recorder, run_id, say)
        request.addfinalizer(lambda: _stop_others(started, say))  # runs after this fixture's own teardown below
        pytestconfig.stash[OTHERS_KEY] = others
        say(
            f"another driver {others.driver} lives beside the implementation until the coexistence phase ends: claims "
            f"{sorted(others.pods)} in namespace {others.namespace}"
            if not others.unavailable
            else f"no other driver beside the implementation: {others.unavailable}"
        )
    # The watcher first: devices are read with the nodes' labels as they are now (an implementation may label nodes
    # when it starts), and once the implementation has published what it owes, up to its promise
    # (observe/publishing.py): a half-written pool read here would make scenarios fail for want of devices that were
    # still on their way. Past the promise the run goes on; scenarios that need what is missing fail with the cause.
    watcher = InvariantWatcher(recorder, prof.driver, prof.identity_attribute).start()
    publish = PublishLog(pytestconfig.stash.get(READY_KEY, time.time()), prof.promises.publish_s)
    # A node without node-local devices reached by a fabric pool: owed only where there is a fabric.
    need_remote = prof.has_fabric and any(sc.remote for sc in selected)
    slices = settled_slices(cluster, prof, publish, watcher.live_nodes, need_remote)
    if publish.owed:
        say(
            f"the implementation still owes, {publish.rel(time.time())} after its readiness (promises.publishSeconds="
            f"{prof.promises.publish_s:g}): {'; '.join(publish.owed)}; scenarios that need it fail"
        )
    pool = DevicePool(
        prof.driver,
        prof.identity_attribute,
        read_devices(slices, prof.identity_attribute, []),
        model_attribute=prof.model_attribute,
    )
    pool.refresh(slices, watcher.live_nodes(), counted=prof.fabric_entries == "counted")
    mark(pytestconfig, "devicesRead")
    kinds = [d.kind for d in pool.devices.values()]  # "fabric": some copy carries binding conditions
    counted = ", ".join(f"{c.pool}/{c.model}: {c.entries}" for c in pool.counted.values())
    found = (
        f"{kinds.count('fabric')} fabric, {kinds.count('local')} node-local"
        if prof.has_fabric  # node-local: every device is on its node; no fabric to name
        else f"{kinds.count('fabric')} node-local with binding conditions, {kinds.count('local')} without"
    )
    say(f"devices of {prof.driver}: {found}" + (f"; count entries {counted}" if counted else ""))
    if prof.fabric_entries == "counted":  # offered count entries never above the fabric's free count
        watcher.model_attribute = prof.model_attribute
        watcher.counted_persist_s = prof.promises.attach_s

    evidence = pytestconfig.stash[EVIDENCE_KEY]

    def context(sc: Scenario) -> Context:
        handle = Cluster(cluster.info)
        options = {"scale_pods": pytestconfig.getoption("--scale-pods")}
        tracker = ObjectTracker(handle, run_id)
        return evidence.remember(
            Context(
                scenario=sc,
                cluster=handle,
                implementation=implementation,
                profile=prof,
                pool=pool,
                objects=tracker,
                say=evidence.say_for(sc.name, say),
                record=recorder,
                options=options,
                invariants=watcher,
                publish=publish,
                others=others,
                log_marks=implementation.log_marks(),
            )
        )

    gate = pytestconfig.stash[FOREIGN_FREE_KEY] = ForeignFree()
    guarded = [evidence.guard(sc) for sc in selected]
    runner = ScenarioRunner(
        guarded,
        context,
        watcher,
        say,
        prof.fabric_concurrency,
        foreign_free=gate,
        crashes=pytestconfig.stash.get(CRASHES_KEY, None),
    )
    pytestconfig.stash[RUNNER_KEY] = runner
    runner.start()
    _switch(pytestconfig, gate, runner, others, cluster, recorder, publish, prof.driver, say).start(gate)
    try:
        yield runner
    finally:
        try:
            runner.join()
        finally:
            watcher.stop()


def _stop_others(others: OtherDrivers, say: Callable[[str], None]) -> None:
    if left := others.stop():
        say(f"the other driver's objects could not all be deleted: {left}")


def _switch(
    config: pytest.Config,
    gate: ForeignFree,
    runner: ScenarioRunner,
    others: OtherDrivers | None,
    cluster: Cluster,
    recorder: Recorder,
    publish: PublishLog,
    driver: str,
    say: Callable[[str], None],
) -> Switch:
    """What the foreign-free phase waits for (suite/phases.py), in order: the coexistence scenarios, the cluster
    scenarios, pytest's thread past the plain cluster tests, the other driver's objects deleted; then the promise
    counted anew from now, once no other driver's binding-condition claim is live."""

    def coexistence() -> str:
        names = runner.wait_beside_others()
        return f"{', '.join(names)} ended" if names else ""

    def cluster_scenarios() -> str:
        cluster_runner = config.stash.get(CLUSTER_RUNNER_KEY, None)
        return f"{len(cluster_runner.wait_all())} ended" if cluster_runner is not None else ""

    def api_tests() -> str:
        done = config.stash[CLUSTER_TESTS_DONE_KEY]
        return "" if done.wait(SCENARIO_DEADLINE_S) else f"not done after {SCENARIO_DEADLINE_S:g}s"

    def other_driver() -> str:
        if others is None:
            return ""
        handle = Cluster(cluster.info)  # this thread's own client
        try:
            left = others.finish(handle)
        finally:
            handle.close()
        return f"{others.driver}'s objects deleted" + (f" (not all: {left})" if left else "")

    def promise() -> str:
        publish.rebase(time.time())
        gate.publish_deadline = publish.deadline
        mark(config, "foreignFreePhase")
        return ""

    steps = [
        ("coexistence", coexistence),
        ("cluster scenarios", cluster_scenarios),
        ("plain cluster tests", api_tests),
        ("other driver", other_driver),
    ]
    return Switch([*steps, ("promise", promise)], lambda: foreign_claims(recorder.live("claim"), driver), say)


@pytest.fixture(scope="session")
def foreign_free_phase(scenarios: ScenarioRunner, pytestconfig: pytest.Config) -> ForeignFree:
    """The foreign-free phase, once it has opened (suite/phases.py): a plain test judged in it waits for it."""
    gate = pytestconfig.stash[FOREIGN_FREE_KEY]
    gate.wait()
    return gate


@pytest.fixture(scope="session")
def other_driver(scenarios: ScenarioRunner, pytestconfig: pytest.Config) -> OtherDrivers:
    """The other driver live beside the implementation from its readiness until the coexistence phase ended."""
    if OTHERS_KEY not in pytestconfig.stash:
        pytest.skip("no coexistence scenario was selected: no other driver lived beside the implementation")
    return pytestconfig.stash[OTHERS_KEY]


@pytest.fixture(scope="session")
def cluster_scenarios(
    cluster: Cluster, recorder: Recorder, run_id: str, pytestconfig: pytest.Config
) -> Iterator[ScenarioRunner]:
    """The selected cluster scenarios (SCH-*: suite-owned drivers, no implementation), started side by side as soon
    as the cluster is up."""
    say = progress(pytestconfig)
    evidence = pytestconfig.stash[EVIDENCE_KEY]

    def context(sc: Scenario) -> ClusterContext:
        handle = Cluster(cluster.info)
        return evidence.remember(
            ClusterContext(
                scenario=sc,
                cluster=handle,
                objects=ObjectTracker(handle, run_id),
                say=evidence.say_for(sc.name, say),
                record=recorder,
                options={"double_allocation_rounds": pytestconfig.getoption("--double-allocation-rounds")},
            )
        )

    selected = [evidence.guard(sc) for sc in pytestconfig.stash.get(SELECTED_KEY, []) if not sc.implementation]
    runner = ScenarioRunner(selected, context, None, say)
    pytestconfig.stash[CLUSTER_RUNNER_KEY] = runner
    runner.start()
    try:
        yield runner
    finally:
        runner.join()


@pytest.fixture
def scenarios_started(pytestconfig: pytest.Config) -> list[ScenarioRunner]:
    """The scenario runners this run has started (cluster, implementation), for a run-wide judgement: it waits for
    them to end. It starts none: a run without implementation tests starts no implementation for it."""
    return [pytestconfig.stash[k] for k in (CLUSTER_RUNNER_KEY, RUNNER_KEY) if k in pytestconfig.stash]
