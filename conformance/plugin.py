"""The pytest plugin: command-line options, the session's cluster, per-test namespaces and object cleanup.

Loaded through the `pytest11` entry point, so `pytest conformance/suite` works wherever the package is
installed. Fixtures that need a cluster start it lazily: unit tests never bring one up.
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import allure
import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster import interrupts
from conformance.cluster.client import USER_AGENT, Cluster
from conformance.cluster.defects import ACCEPT_PREFIX, PROPERTY, accepted, catalogue, check_accepts
from conformance.cluster.gates import parse_gate_overrides
from conformance.cluster.objects import RUN_LABEL, ObjectTracker
from conformance.cluster.providers import PROVIDERS, ClusterInfo, ClusterSpec, ProviderNotReady, make_provider
from conformance.cluster.providers.base import KIND_NODES, LOCAL_NODES, default_nodes
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import DEFAULT_VERSION, UnsupportedVersion, parse_version
from conformance.cluster.waits import CANCELLED, Cancelled, wait_for
from conformance.implementation.harness import Implementation, ImplementationFailed
from conformance.implementation.profile import DEFAULT_BINDING_TIMEOUT_S, LoadedProfile, ProfileError, load_profile
from conformance.observe.devices import DevicePool, read_devices
from conformance.observe.invariants import InvariantWatcher
from conformance.observe.publishing import PublishLog, settled_slices
from conformance.observe.recorder import Recorder
from conformance.report.bundle import make_bundle
from conformance.report.catalogue import CATALOGUE, KEP_URL
from conformance.report.evidence import Evidence
from conformance.report.gather import FILE_LIMIT, TOTAL_LIMIT
from conformance.report.html import render as render_html
from conformance.report.outcomes import (
    NOT_APPLICABLE_PREFIX,
    NOTE_PROPERTY,
    Outcomes,
    RunResult,
    not_applicable,
    not_applicable_reason,
    not_shown,
    table,
    write_certification_junit,
    write_conformance_report,
)
from conformance.report.reasons import headline, report_reason
from conformance.report.verdict import (
    EXIT_KNOWN_DEFECT,
    EXIT_PARTIAL,
    IMPLEMENTATION_AREAS,
    NOT_APPLICABLE,
    NOT_CERTIFIED,
    KnownFailures,
    Verdict,
    exit_status,
    known_defects,
    overall,
    verdicts,
)
from conformance.suite.declared import settings_report, settings_summary
from conformance.suite.implementation.restart_cells import matrix_report
from conformance.suite.others import OtherDrivers, other_drivers
from conformance.suite.scenario import (
    REGISTRY,
    ClusterContext,
    Context,
    Scenario,
    ScenarioFailed,
    ScenarioRunner,
    profile_gap,
    summarize,
)

_PROFILE_KEY = pytest.StashKey[LoadedProfile | None]()
_CLUSTER_KEY = pytest.StashKey[tuple[ClusterInfo, dict[str, float]]]()
_SELECTED_KEY = pytest.StashKey[list[Scenario]]()
_RUNNER_KEY = pytest.StashKey[ScenarioRunner]()
_CLUSTER_RUNNER_KEY = pytest.StashKey[ScenarioRunner]()
_EVIDENCE_KEY = pytest.StashKey[Evidence]()
# Moments of the run, in seconds from pytest's start (where the wall goes: bring-up, implementation start, device read
# settle, scenarios, teardown, reports); in the run report as `phases` and printed in the terminal summary.
_MARKS_KEY = pytest.StashKey[dict[str, float]]()
_READY_KEY = pytest.StashKey[float]()  # time.time() when the implementation was ready
_OTHERS_KEY = pytest.StashKey[OtherDrivers]()  # the other driver live beside the implementation (IMP-17)
NAMESPACE_READY_S = 30.0
DEFAULT_PROFILE = Path(__file__).resolve().parent.parent / "fixtures" / "profiles" / "reference.yaml"
NAMESPACE_GONE_S = 60.0
NO_PROFILE = "none"
NO_PROFILE_REASON = "no implementation profile (--profile none): this run certifies the cluster only"
_FULL_TRACE = [False]  # pytest --full-trace, for the interrupt hook (which gets no config)


def pytest_addoption(parser: pytest.Parser) -> None:
    # --keep-cluster and --kubeconfig come from pytest-kind (a dependency) and serve every provider.
    group = parser.getgroup("dra-conformance", "KEP-5007 conformance")
    group.addoption(
        "--provider",
        choices=PROVIDERS,
        default="local",
        help="where the cluster comes from (default: local, real binaries under kwokctl)",
    )
    group.addoption(
        "--k8s-version",
        default=DEFAULT_VERSION,
        help=f"Kubernetes version of the local cluster, e.g. 1.37.2 or 1.34 (default {DEFAULT_VERSION})",
    )
    group.addoption(
        "--nodes",
        type=int,
        default=None,
        help=f"number of worker nodes: kwok nodes of the local cluster (default {LOCAL_NODES}; the reference profiles' "
        f"fabric reaches at most 8), kind workers (default {KIND_NODES})",
    )
    group.addoption(
        "--binding-timeout",
        type=int,
        default=None,
        help="scheduler bindingTimeout in seconds, where the release lets it be set (default: from the profile's "
        "promised attach, at least 20); on an existing cluster it declares the one configured there (default 20): "
        "SCH-6 and BASE-2 measure it",
    )
    group.addoption(
        "--feature-gates",
        default="",
        help="gate values over the suite's own, e.g. DRADeviceBindingConditions=false (local provider)",
    )
    group.addoption(
        "--scheduler-url",
        default=None,
        help="with --provider existing: kube-scheduler's secure port where this machine reaches it (e.g. "
        "https://10.0.0.1:10259), so BASE-2 reads the gates it runs (/metrics, with the kubeconfig's credentials); "
        "without it they are reported unread",
    )
    group.addoption(
        "--scheduler-verbosity",
        type=int,
        default=None,
        help="kube-scheduler's --v on the local cluster (its log: <cluster folder>/kwok/clusters/<name>/logs/"
        "kube-scheduler.log, kept with --keep-cluster); e.g. 5 for the DRA plugin's assume-cache and in-flight steps",
    )
    group.addoption(
        "--allow-unmarked-cluster",
        action="store_true",
        help="with --provider existing: run even if the cluster lacks the test-cluster marker ConfigMap",
    )
    group.addoption(
        "--reports-dir",
        default=None,
        help="write conformance-report.yaml and certification-junit.xml (one case per requirement) here",
    )
    group.addoption(
        "--accept",
        action="append",
        default=[],
        help=f"'partial': exit 0 for a partial result (a MUST skipped or not covered) instead of {EXIT_PARTIAL}, for "
        "runs that knowingly cover a subset of the suite or a profile that knowingly lacks a capability; "
        f"'{ACCEPT_PREFIX}ID': a requirement failed only by that known upstream defect of the cluster's release "
        f"(conformance/cluster/known-defects.yaml) does not make the exit status {EXIT_KNOWN_DEFECT}; it still "
        "reads failed, the verdict stays failure and every report lists it as accepted. Repeatable",
    )
    group.addoption(
        "--download-binaries",
        action="store_true",
        help="let kwokctl download official release binaries instead of building them",
    )
    group.addoption(
        "--scale-pods",
        type=int,
        default=16,
        help="pods of the SCALE-1 stress scenario, each with its own fabric device (the KEP test plan says 1000)",
    )
    group.addoption(
        "--double-allocation-rounds",
        type=int,
        default=2,
        help="rounds of binding timeouts the SCH-9 double-allocation scenario watches (a round: each of its 2 "
        "devices' allocations timed out once; about one bindingTimeout and a PreBind poll per round)",
    )
    group.addoption(
        "--profile",
        default=str(DEFAULT_PROFILE),
        help="implementation profile (YAML) of the implementation under test, or 'none' to certify the cluster only "
        "(API-*, SCH-* run on suite-owned drivers; every IMP-* is skipped)",
    )


def _mark(config: pytest.Config, moment: str, seconds: float | None = None) -> None:
    """Note when a phase of the run ended, now or `seconds` from the start (the first time only)."""
    reporter = config.pluginmanager.get_plugin("dra-conformance-requirements")
    if reporter is not None:
        at = time.monotonic() - reporter.started if seconds is None else seconds
        config.stash.setdefault(_MARKS_KEY, {}).setdefault(moment, round(at, 2))


def pytest_configure(config: pytest.Config) -> None:
    try:
        check_accepts(config.getoption("--accept"))
    except ValueError as exc:
        raise pytest.UsageError(f"--accept: {exc}") from None
    config.pluginmanager.register(RequirementReporter(config), "dra-conformance-requirements")
    config.addinivalue_line("markers", "requirement(id): the catalogue requirement a test checks, e.g. API-2")
    config.addinivalue_line("markers", "run_wide: judged over the whole run's record; runs after every other test")
    # SIGINT and SIGTERM stop the run at once; the implementation's and the cluster's teardown still run (shielded).
    interrupts.install()
    _ANNOUNCED.clear()  # once per run, also for runs in one process (pytester)
    _FULL_TRACE[0] = bool(config.getoption("fulltrace", False))
    try:
        parse_version(config.getoption("--k8s-version"))
    except UnsupportedVersion as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        chosen = config.getoption("--profile")
        config.stash[_PROFILE_KEY] = None if chosen == NO_PROFILE else load_profile(chosen)
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    reports = config.getoption("--reports-dir")
    loaded = config.stash[_PROFILE_KEY]
    config.stash[_EVIDENCE_KEY] = Evidence(
        Path(reports) if reports else None, driver=loaded.profile.driver if loaded else None
    )
    try:
        parse_gate_overrides(config.getoption("--feature-gates"))
    except ValueError as exc:
        raise pytest.UsageError(f"--feature-gates: {exc}") from None
    if (config.getoption("--nodes") or 1) < 1:
        raise pytest.UsageError("--nodes must be at least 1")
    if config.getoption("--double-allocation-rounds") < 1:
        raise pytest.UsageError("--double-allocation-rounds must be at least 1")
    if config.getoption("--scale-pods") < 2:
        raise pytest.UsageError("--scale-pods must be at least 2 (pods waiting in PreBind side by side)")
    if (config.getoption("--binding-timeout") or 1) < 1:
        raise pytest.UsageError("--binding-timeout must be at least 1 second (the scheduler's minimum)")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    """A test whose scenario failed fails here, in its call phase, with the scenario's error and evidence."""
    for value in pyfuncitem.funcargs.values():
        if isinstance(value, ScenarioFailed):
            if reason := _requirement_gap(pyfuncitem):  # skipped for the profile, as `profile check` predicts
                pytest.skip(reason)
            raise value.error


def _requirement_gap(item: pytest.Function) -> str | None:
    """Why the profile cannot have this test's requirement judged (Scenario.probe_for), or None."""
    marker, loaded = item.get_closest_marker("requirement"), item.config.stash.get(_PROFILE_KEY, None)
    if marker is None or loaded is None:
        return None
    module = getattr(item.module, "__name__", "")
    scenarios = [sc for sc in REGISTRY.values() if sc.module == module and marker.args[0] in sc.probe_for]
    return next((gap for sc in scenarios if (gap := profile_gap(sc, loaded.profile, marker.args[0]))), None)


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C or SIGTERM: say so at once, and stop the scenario threads' waits, so teardown does not wait for their
    deadlines. pytest then renders the interrupt's traceback (only its last line is shown): cut to that line, which
    took seconds on a busy machine (--full-trace keeps it whole)."""
    if excinfo.type is not KeyboardInterrupt:  # pytest's own stops (collection errors, -x) come here too
        return
    _announce_interrupt()
    if not _FULL_TRACE[0]:
        excinfo.traceback = excinfo.traceback[-1:]


_ANNOUNCED: list[bool] = []


def _announce_interrupt() -> None:
    """Once per run: the run is stopping, and what it will still do."""
    CANCELLED.set()
    if _ANNOUNCED:
        return
    _ANNOUNCED.append(True)
    interrupts.say(  # not through pytest's capture, which shows a phase's output only for a failure
        f"interrupted ({interrupts.interrupted() or 'SIGINT'}): stopping the scenarios, "
        "the implementation and the cluster; the reports will cover what ran"
    )


def swallowed_interrupt(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> bool:
    """A phase that failed because the interrupt landed inside a library that turned it into its own error
    (pydantic builds the kubernetes client's validators lazily and wraps a KeyboardInterrupt raised meanwhile in a
    SchemaError): report it as interrupted, not as a finding, and stop the run after this test as the interrupt
    asked."""
    if not (report.failed and call.excinfo is not None and interrupts.arrived_between(call.start, call.stop)):
        return False
    stopped_by = f"interrupted by {interrupts.interrupted()}"
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {stopped_by} ({call.excinfo.typename})")
    item.session.shouldstop = stopped_by
    _announce_interrupt()
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish() -> None:
    """Only teardown is left (the implementation, the cluster): a signal now must not cut it short."""
    interrupts.shield_from_now_on()


@pytest.fixture(scope="session")
def run_id() -> str:
    """Labels every object of this run (RUN_LABEL) so the run can find and remove what it made."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def profile(pytestconfig: pytest.Config) -> LoadedProfile:
    """The implementation profile (validated when pytest starts, before any cluster work); tests that need one are
    skipped in a cluster-only run."""
    loaded = pytestconfig.stash[_PROFILE_KEY]
    if loaded is None:
        pytest.skip(NO_PROFILE_REASON)
    return loaded


@pytest.fixture(scope="session")
def recorder(cluster: Cluster, run_id: str, pytestconfig: pytest.Config) -> Iterator[Recorder]:
    """The run-wide record (claims, the run's pods, slices, nodes, events, taint rules; the fabric probe once the
    implementation is up): timelines, failure snapshots and gathered objects are read from it."""
    loaded = pytestconfig.stash[_PROFILE_KEY]
    rec = Recorder(Cluster(cluster.info), run_id, loaded.profile.identity_attribute if loaded else None).start()
    pytestconfig.stash[_EVIDENCE_KEY].recorder = rec
    yield rec
    pytestconfig.stash[_EVIDENCE_KEY].end()
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
    impl = Implementation(profile, cluster.info.kubeconfig, workdir, progress=_progress(pytestconfig))
    evidence = pytestconfig.stash[_EVIDENCE_KEY]
    try:
        impl.start()
    except (ImplementationFailed, ProfileError) as exc:
        evidence.gather_logs(workdir, "implementation", "implementation process logs")
        pytest.exit(f"cannot start the implementation of profile {profile.profile.name!r}: {exc}", returncode=3)
    _mark(pytestconfig, "implementationReady")
    pytestconfig.stash[_READY_KEY] = time.time()  # promises.publishSeconds counts from here
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
    say = _progress(pytestconfig)
    selected = [sc for sc in pytestconfig.stash.get(_SELECTED_KEY, []) if sc.implementation]
    # Another driver's class, slice and claims in every binding state, live from now until every scenario has ended
    # (suite/others.py): the implementation publishes and works beside them, as in a real cluster (IMP-17).
    others = other_drivers(Cluster(cluster.info), recorder, run_id, say)
    request.addfinalizer(lambda: _stop_others(others, say))  # runs after this fixture's own teardown below
    pytestconfig.stash[_OTHERS_KEY] = others
    say(
        f"another driver {others.driver} lives beside the implementation: claims {sorted(others.pods)} in namespace "
        f"{others.namespace}"
        if not others.unavailable
        else f"no other driver beside the implementation: {others.unavailable}"
    )
    # The watcher first: devices are read with the nodes' labels as they are now (an implementation may label nodes
    # when it starts), and once the implementation has published what it owes, up to its promise
    # (observe/publishing.py): a half-written pool read here would make scenarios fail for want of devices that were
    # still on their way. Past the promise the run goes on; scenarios that need what is missing fail with the cause.
    watcher = InvariantWatcher(recorder, prof.driver, prof.identity_attribute).start()
    publish = PublishLog(pytestconfig.stash.get(_READY_KEY, time.time()), prof.promises.publish_s)
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
    _mark(pytestconfig, "devicesRead")
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

    evidence = pytestconfig.stash[_EVIDENCE_KEY]

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

    runner = ScenarioRunner([evidence.guard(sc) for sc in selected], context, watcher, say, prof.fabric_concurrency)
    pytestconfig.stash[_RUNNER_KEY] = runner
    runner.start()
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


@pytest.fixture(scope="session")
def other_driver(scenarios: ScenarioRunner, pytestconfig: pytest.Config) -> OtherDrivers:
    """The other driver live beside the implementation from its readiness until every scenario has ended."""
    return pytestconfig.stash[_OTHERS_KEY]


@pytest.fixture(scope="session")
def cluster_scenarios(
    cluster: Cluster, recorder: Recorder, run_id: str, pytestconfig: pytest.Config
) -> Iterator[ScenarioRunner]:
    """The selected cluster scenarios (SCH-*: suite-owned drivers, no implementation), started side by side as soon
    as the cluster is up."""
    say = _progress(pytestconfig)
    evidence = pytestconfig.stash[_EVIDENCE_KEY]

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

    selected = [evidence.guard(sc) for sc in pytestconfig.stash.get(_SELECTED_KEY, []) if not sc.implementation]
    runner = ScenarioRunner(selected, context, None, say)
    pytestconfig.stash[_CLUSTER_RUNNER_KEY] = runner
    runner.start()
    try:
        yield runner
    finally:
        runner.join()


def _binding_timeout(config: pytest.Config) -> int:
    """--binding-timeout, or what the profile's promises need (Profile.binding_timeout_s) on a cluster the suite
    starts; an existing cluster's cannot be set, so there it is what the user declares (SCH-6 and BASE-2 measure it)."""
    given = config.getoption("--binding-timeout")
    if given is not None:
        return int(given)
    loaded = config.stash.get(_PROFILE_KEY, None)
    if loaded is None or config.getoption("--provider") == "existing":
        return DEFAULT_BINDING_TIMEOUT_S
    return loaded.profile.binding_timeout_s()


@pytest.fixture
def scenarios_started(pytestconfig: pytest.Config) -> list[ScenarioRunner]:
    """The scenario runners this run has started (cluster, implementation), for a run-wide judgement: it waits for
    them to end. It starts none: a run without implementation tests starts no implementation for it."""
    return [pytestconfig.stash[k] for k in (_CLUSTER_RUNNER_KEY, _RUNNER_KEY) if k in pytestconfig.stash]


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config, run_id: str) -> Iterator[Cluster]:
    """A running cluster for the whole session; torn down at the end unless --keep-cluster."""
    opt = pytestconfig.getoption
    spec = ClusterSpec(
        version=parse_version(opt("--k8s-version")),
        nodes=default_nodes(opt("--nodes") or (KIND_NODES if opt("--provider") == "kind" else LOCAL_NODES)),
        binding_timeout_s=_binding_timeout(pytestconfig),
        keep=opt("--keep-cluster"),
        feature_gates=parse_gate_overrides(opt("--feature-gates")),
        scheduler_verbosity=opt("--scheduler-verbosity"),
    )
    provider = make_provider(
        opt("--provider"),
        download=opt("--download-binaries"),
        kubeconfig=opt("--kubeconfig"),
        allow_unmarked=opt("--allow-unmarked-cluster"),
        progress=_progress(pytestconfig),
        option=opt,  # the kind provider reads pytest-kind's options (--cluster-name, --kind-image, ...)
    )
    try:
        info = provider.start(spec)
    except (ProviderNotReady, BuildError) as exc:
        pytest.exit(f"cannot start the {provider.name} cluster: {exc}", returncode=3)
    pytestconfig.stash[_CLUSTER_KEY] = (info, getattr(provider, "timings", {}))
    _mark(pytestconfig, "clusterReady")
    handle = Cluster(info)
    try:
        yield handle
        if not CANCELLED.is_set():  # an interrupted run deletes its objects but does not wait to check
            leaks = _leftover_namespaces(handle, run_id)
            assert not leaks, f"namespaces of this run still present after the tests: {leaks}"
    finally:
        handle.close()
        workdir = getattr(provider, "workdir", None)  # the local provider's components log there
        if isinstance(workdir, Path):
            pytestconfig.stash[_EVIDENCE_KEY].gather_logs(workdir, "control-plane", "control-plane component logs")
        provider.stop()


def _progress(config: pytest.Config) -> Callable[[str], None]:
    """Progress of long phases (build, cluster start) on the terminal, past pytest's output capture."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def say(message: str) -> None:
        if reporter is None or capture is None:
            print(message, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[dra-conformance] {message}")

    return say


def _cluster_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _CLUSTER_KEY not in config.stash:
        return
    info, timings = config.stash[_CLUSTER_KEY]
    gates = ", ".join(f"{k}={str(v).lower()}" for k, v in info.feature_gates.items()) or "release defaults"
    timeout = f"{info.binding_timeout_s}s" + ("" if info.binding_timeout_configurable else " (fixed by the release)")
    terminalreporter.section("KEP-5007 cluster")
    terminalreporter.write_line(f"provider {info.provider}, Kubernetes {info.version}, {len(info.nodes)} nodes")
    terminalreporter.write_line(f"feature gates set: {gates}; binding timeout {timeout}")
    if _CLUSTER_RUNNER_KEY in config.stash:
        measured = settings_report(info, config.stash[_CLUSTER_RUNNER_KEY])["measured"]
        terminalreporter.write_line(f"measured (BASE-2): {settings_summary(measured)}")
    if "bring_up_s" in timings:
        terminalreporter.write_line(f"bring-up {timings['bring_up_s']:.1f}s")
    if marks := config.stash.get(_MARKS_KEY, {}):
        moments = sorted(marks.items(), key=lambda kv: kv[1])
        terminalreporter.write_line("run phases (s from start): " + ", ".join(f"{k} {v:.1f}" for k, v in moments))


def _leftover_namespaces(cluster: Cluster, run_id: str) -> list[str]:
    def names() -> list[str]:
        items = cluster.core.list_namespace(label_selector=f"{RUN_LABEL}={run_id}").items
        return [ns.metadata.name for ns in items]

    try:
        wait_for(
            names,
            lambda left: not left,
            timeout=NAMESPACE_GONE_S,
            expected="test namespaces to be deleted",
            max_interval=0.5,  # the run's tail waits on this
        )
    except AssertionError:
        return names()
    except Cancelled:  # interrupted meanwhile: not checked
        return []
    return []


@pytest.fixture
def objects(cluster: Cluster, run_id: str, request: pytest.FixtureRequest) -> Iterator[ObjectTracker]:
    """Creates objects for a test and deletes them afterwards, also when the test fails."""
    cluster.api.user_agent = f"{USER_AGENT}/{request.node.name}"
    tracker = ObjectTracker(cluster, run_id)
    yield tracker
    failures = tracker.cleanup()
    cluster.api.user_agent = USER_AGENT
    assert not failures, f"cleanup failed: {failures}"


@pytest.fixture
def namespace(cluster: Cluster, objects: ObjectTracker, request: pytest.FixtureRequest) -> str:
    """A fresh namespace for one test, with its default ServiceAccount ready; deleted after the test."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    ns = objects.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": f"{base}-"}}
    ).metadata.name

    wait_default_service_account(cluster, ns)
    return ns


def wait_default_service_account(cluster: Cluster, ns: str) -> None:
    """Pods need the namespace's default ServiceAccount, which kube-controller-manager creates a moment later."""

    def default_sa() -> bool:
        try:
            cluster.core.read_namespaced_service_account("default", ns)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_for(
        default_sa,
        bool,
        timeout=NAMESPACE_READY_S,
        expected=f"ServiceAccount {ns}/default (created by kube-controller-manager)",
        max_interval=0.25,  # every API test waits here: the default back-off to 2 s adds up over the tests
    )


@pytest.fixture(autouse=True)
def _requirement_property(request: pytest.FixtureRequest, record_property: Any) -> None:
    """Put the catalogue entry of the test into the JUnit XML and the Allure results, where reviewers read it."""
    marker = request.node.get_closest_marker("requirement")
    if not marker:
        return
    # The first suite test starts every scenario, so they overlap the rest: the cluster's first (they need no
    # implementation), then the implementation's (starting the implementation meanwhile).
    selected = request.config.stash.get(_SELECTED_KEY, [])
    if selected or "cluster" in request.fixturenames:  # first: the record covers every scenario from its start
        request.getfixturevalue("recorder")
    if any(not sc.implementation for sc in selected):
        request.getfixturevalue("cluster_scenarios")
    if any(sc.implementation for sc in selected) and request.config.stash[_PROFILE_KEY] is not None:
        request.getfixturevalue("scenarios")
    req = CATALOGUE[marker.args[0]]
    record_property("requirement", req.id)
    record_property("level", req.level)
    record_property("kep_section", req.kep_section)
    allure.dynamic.epic("KEP-5007")
    allure.dynamic.feature(req.area)
    allure.dynamic.story(req.id)
    allure.dynamic.tag(req.level)
    allure.dynamic.link(KEP_URL, name="KEP-5007")


class RequirementReporter:
    """Collects per-requirement outcomes during the run and writes the reports at its end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.started_at = time.time()
        self.requirement_of: dict[str, str] = {}
        self.outcomes = Outcomes()
        self.reasons: dict[tuple[str, str], str] = {}  # (nodeid, phase) -> the exception's message and evidence
        self.interrupted: set[str] = set()  # tests whose phase failed only because the interrupt landed in it
        self.module_of: dict[str, str] = {}
        self.summary: dict[str, dict[str, Any]] = {}
        self.packaging = ""
        self.verdicts: dict[str, Verdict] = {}
        self.result: str | None = None
        self.other_failures: set[str] = set()  # failed test phases that name no known upstream defect
        self.known_failures: KnownFailures | None = None
        self.accepted = accepted(config.getoption("--accept"))

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Map each test to its requirement id; an id not in the catalogue is an error, not a silent extra."""
        for item in items:
            marker = item.get_closest_marker("requirement")
            if marker is None:
                continue
            if not marker.args or marker.args[0] not in CATALOGUE:
                raise pytest.UsageError(
                    f"{item.nodeid}: requirement {marker.args!r} is not in conformance/catalogue.py"
                )
            self.requirement_of[item.nodeid] = marker.args[0]
            self.module_of[item.nodeid] = getattr(getattr(item, "module", None), "__name__", "")
            req = CATALOGUE[marker.args[0]]
            if why := req.not_applicable(self.model):  # not run (no fixture either): reported not-applicable
                item.add_marker(pytest.mark.skip(reason=NOT_APPLICABLE_PREFIX + why))
                for label in (allure.epic("KEP-5007"), allure.feature(req.area), allure.story(req.id)):
                    item.add_marker(label)
                item.add_marker(allure.tag(NOT_APPLICABLE))
                item.user_properties += [("requirement", req.id), ("level", req.level), ("outcome", NOT_APPLICABLE)]
        # Run-wide judgements last: by then every selected scenario has started, and they wait for all to end.
        items.sort(key=lambda item: item.get_closest_marker("run_wide") is not None)
        modules = {item.module.__name__ for item in items if isinstance(item, pytest.Function)}
        # A scenario all of whose requirements do not apply to the profile's binding model is not started.
        self.config.stash[_SELECTED_KEY] = [
            sc
            for sc in REGISTRY.values()
            if sc.module in modules and not all(CATALOGUE[r].not_applicable(self.model) for r in sc.requirements)
        ]

    @property
    def model(self) -> str | None:
        """The profile's binding model (None: a run without a profile)."""
        loaded = self.config.stash.get(_PROFILE_KEY, None)
        return loaded.profile.binding_model if loaded is not None else None

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, Any] | None:
        """A test of a requirement that does not apply to the binding model: its own outcome in pytest's terminal
        (`12 not applicable`), apart from the skipped ones."""
        if report.skipped and dict(report.user_properties).get("outcome") == NOT_APPLICABLE:
            return "not applicable", "n", ("NOT APPLICABLE", {"cyan": True})
        return None

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Requirements left out by -k/-m are reported as not covered, saying so (not as missing scenarios)."""
        for item in items:
            marker = item.get_closest_marker("requirement")
            if marker and marker.args and marker.args[0] in CATALOGUE:
                self.requirement_of.pop(item.nodeid, None)
                self.outcomes.deselected.setdefault(marker.args[0], []).append(item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """Allure steps and attachments of the scenarios behind the test (they have ended when it runs)."""
        evidence = self.config.stash[_EVIDENCE_KEY]
        module = self.module_of.get(item.nodeid)
        runners = [self.config.stash[k] for k in (_CLUSTER_RUNNER_KEY, _RUNNER_KEY) if k in self.config.stash]
        if module and runners and self.config.getoption("--alluredir", None):
            for sc in REGISTRY.values():
                timing = next((r.timings[sc.name] for r in runners if sc.name in r.timings), None)
                if sc.module == module and timing is not None and timing.end is not None:
                    try:
                        evidence.allure(sc.name, timing)
                    except Exception as exc:  # evidence must never change a test's outcome
                        item.user_properties.append(("allure_evidence_error", repr(exc)))
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        """Keep the exception's own message (with the evidence the check put in it) while pytest still has it."""
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if swallowed_interrupt(item, call, report):
            self.interrupted.add(item.nodeid)  # not reached, as with any interrupt: its requirement is not-covered
            return
        if report.failed and item.nodeid in self.requirement_of:
            reason = report_reason(report, call.excinfo)
            self.reasons[(item.nodeid, report.when)] = reason
            item.user_properties.append(("failure_reason", reason))  # pytest's JUnit carries it too
            namespace = getattr(item, "funcargs", {}).get("namespace")
            if isinstance(namespace, str):  # an API test: its objects, before its namespace is deleted
                self.config.stash[_EVIDENCE_KEY].failed(item.nodeid, {namespace})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        known = dict(report.user_properties).get(PROPERTY) if report.failed else None
        if report.failed and not known:
            self.other_failures.add(report.nodeid)
        requirement = self.requirement_of.get(report.nodeid)
        if requirement is None or (report.when != "call" and report.passed) or report.nodeid in self.interrupted:
            return
        reason, outcome = "", report.outcome
        if report.failed or report.skipped:
            reason = self.reasons.get((report.nodeid, report.when)) or report_reason(report)
            if report.failed and report.when != "call":
                reason = f"{report.when}: {reason}"
            if report.skipped and (why := not_applicable_reason(reason)) is not None:
                reason, outcome = why, NOT_APPLICABLE
        elif report.when == "call":  # a passed check may say what it accepted (e.g. IMP-9's declared rights)
            reason = "; ".join(str(v) for k, v in report.user_properties if k == NOTE_PROPERTY)
        result = RunResult(report.nodeid, outcome, reason, report.duration, known_defect=known)
        self.outcomes.add(requirement, result)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.requirement_of and not self.outcomes.deselected:
            return
        loaded = self.config.stash[_PROFILE_KEY]
        not_certified = NO_PROFILE_REASON if loaded is None else None
        self.summary = summary = self.outcomes.summary(not_certified=not_certified, model=self.model)
        self.verdicts = verdicts(summary, no_implementation=not_certified, model=self.model)
        self.result = overall(self.verdicts)
        self.known_failures = known = KnownFailures(
            summary, self.accepted, bool(self.other_failures), not_certified, self.model
        )
        session.exitstatus = exit_status(self.result, int(exitstatus), set(self.config.getoption("--accept")), known)
        reports_dir = self.config.getoption("--reports-dir")
        if reports_dir:
            self._write_reports(Path(reports_dir), summary, loaded)

    def _write_reports(self, out: Path, summary: dict[str, dict[str, Any]], loaded: LoadedProfile | None) -> None:
        run: dict[str, Any] = {"implementation": {"profile": NO_PROFILE, "reason": NO_PROFILE_REASON}}
        if loaded is not None:
            profile = loaded.profile
            run["implementation"] = {
                "profile": profile.name,
                "version": profile.version,
                "url": profile.url,
                "driver": profile.driver,
                "bindingModel": profile.binding_model,
                **({"fabricEntries": profile.fabric_entries} if profile.has_fabric else {}),  # none without a fabric
                "file": str(loaded.path),
            }
        run["wallSeconds"] = round(time.monotonic() - self.started, 1)
        _mark(self.config, "teardownDone")
        if stopped_by := interrupts.interrupted():
            run["interrupted"] = stopped_by
        if _CLUSTER_KEY in self.config.stash:
            info, timings = self.config.stash[_CLUSTER_KEY]
            run["cluster"] = {
                "provider": info.provider,
                "kubernetes": info.version,
                "nodes": len(info.nodes),
                "featureGates": info.feature_gates,
                "bindingTimeoutSeconds": info.binding_timeout_s,
                "bringUpSeconds": round(timings.get("bring_up_s", 0.0), 2),
            }
            if _CLUSTER_RUNNER_KEY in self.config.stash:
                run["cluster"]["settings"] = settings_report(info, self.config.stash[_CLUSTER_RUNNER_KEY])
        runners = [self.config.stash[k] for k in (_CLUSTER_RUNNER_KEY, _RUNNER_KEY) if k in self.config.stash]
        if runners:
            timings = {name: t for r in runners for name, t in r.timings.items()}
            measured: dict[str, list[float]] = {}
            for r in runners:
                for key, values in r.measurements.items():
                    measured.setdefault(key, []).extend(values)
            ends = [t.end for t in timings.values() if t.end is not None]
            if ends:  # scenario timings are wall-clock times; the marks count from pytest's start
                _mark(self.config, "scenariosDone", max(ends) - self.started_at)
            run["scenarios"] = {
                name: {"outcome": t.outcome, "seconds": round((t.end or t.start) - t.start, 2)}
                for name, t in sorted(timings.items())
            }
            run["measurements"] = {key: summarize(v) for key, v in sorted(measured.items()) if v}
            implementation = self.config.stash.get(_RUNNER_KEY, None)
            if implementation is not None and "restart" in implementation.scenarios:  # IMP-8's matrix, cell by cell
                run["restartMatrix"] = matrix_report(implementation.finished("restart"))
            if implementation is not None and (cost := implementation.finished("path-cost")):
                run["pathCost"] = cost.as_dict()  # COST-1..3: the figures against the binding model's minimum
            evidence = self.config.stash[_EVIDENCE_KEY]
            run["record"] = evidence.write(timings)
            self._attach_evidence(summary, evidence)
        if (artefacts := self.config.stash[_EVIDENCE_KEY].artefacts) is not None:
            artefacts.write_index()
            run["artefacts"] = {
                "index": "artefacts/index.json",
                "keptBytes": artefacts.kept,
                "fileLimitBytes": FILE_LIMIT,
                "totalLimitBytes": TOTAL_LIMIT,
                "gatherSeconds": round(artefacts.seconds, 2),
            }
        marks = self.config.stash.get(_MARKS_KEY, {})
        run["phases"] = dict(sorted(marks.items(), key=lambda kv: kv[1]))
        write_conformance_report(out / "conformance-report.yaml", summary, run, self.verdicts, self.known_defects())
        title = f"KEP-5007 conformance: {loaded.profile.name if loaded else 'cluster only'}"
        write_certification_junit(out / "certification-junit.xml", summary, title, self.accepted)
        began = time.monotonic()
        try:
            page = render_html(out)
            bundle = make_bundle(out)
        except Exception as exc:  # the verdict stands without the page; say why it is missing
            self.packaging = f"the HTML report or the bundle could not be written: {exc!r}"
        else:
            self.packaging = (
                f"html {page.name} and bundle {bundle.name} ({bundle.stat().st_size / 1e6:.1f} MB, checksums in "
                f"MANIFEST.sha256) in {time.monotonic() - began:.1f}s"
            )

    def known_defects(self) -> list[dict[str, Any]]:
        """The known upstream defects this run's failures were, each with the requirements and whether accepted."""
        out = []
        for kid, rids in sorted(known_defects(self.summary).items()):
            d = catalogue()[kid]
            out.append(
                {
                    "id": kid,
                    "requirements": rids,
                    "accepted": kid in self.accepted,
                    "summary": d.summary,
                    "releases": d.releases,
                    "measured": d.measured,
                    "unaffected": d.unaffected,
                    "writeup": d.writeup,
                }
            )
        return out

    def _attach_evidence(self, summary: dict[str, dict[str, Any]], evidence: Evidence) -> None:
        """Each requirement links the timelines (and failure snapshots) of its scenarios; a failed one also carries
        the scenario's decisive moments in words, so the certification JUnit shows the broken moment."""
        by_module: dict[str, list[str]] = {}
        for sc in REGISTRY.values():
            by_module.setdefault(sc.module, []).append(sc.name)
        for rid, entry in summary.items():
            names = [n for t in entry.get("tests", []) for n in by_module.get(self.module_of.get(t, ""), [])]
            names = [n for n in dict.fromkeys(names) if n in evidence.timelines]
            links = [p for n in names for p in [*evidence.timeline_paths(n), evidence.failures.get(n)] if p]
            links += [evidence.failures[t] for t in entry.get("tests", []) if t in evidence.failures]
            if links:
                entry["evidence"] = list(dict.fromkeys([*entry.get("evidence", []), *links]))
            if entry["outcome"] == "failed" and CATALOGUE[rid].area in IMPLEMENTATION_AREAS:
                # the implementation's own logs of the run, next to the failure that quotes them
                logs = evidence.logs.get("implementation", [])
                entry["evidence"] = list(dict.fromkeys([*entry.get("evidence", []), *logs]))
            if entry["outcome"] == "failed":
                for name in names:
                    moments = evidence.decisive(name)
                    if moments:
                        entry["reason"] += (
                            f"\ntimeline of scenario {name} (seconds from its start; [ids]: what a moment decides):\n"
                            + "\n".join(moments)
                        )

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if self.result is None:
            return
        summary = self.summary
        write = terminalreporter.write_line
        terminalreporter.section("KEP-5007 requirements")
        for line in table(summary):
            write(line)
        missing = not_shown(summary)
        if missing:
            terminalreporter.section("KEP-5007: NOT SHOWN TO PASS", red=True, bold=True)
            for line in missing:
                failed = " failed " in f" {line} "
                write(line, red=failed, yellow=not failed, bold=True)
        if apart := not_applicable(summary):
            title = f"KEP-5007: NOT APPLICABLE to bindingModel {self.model} (not run; counted out of the verdict)"
            terminalreporter.section(title, cyan=True)
            for line in apart:
                write(line, cyan=True)
        if known := self.known_defects():
            terminalreporter.section("KEP-5007: KNOWN UPSTREAM DEFECTS (the requirements still fail)", red=True)
            for d in known:
                taken = "ACCEPTED (--accept known-defect:" + d["id"] + ")" if d["accepted"] else "not accepted"
                write(f"{d['id']}: {', '.join(d['requirements'])} failed; {taken}; write-up {d['writeup']}", bold=True)
                write(f"  {d['summary']}")
        terminalreporter.section("KEP-5007 verdicts")
        for subject, found in self.verdicts.items():
            colour = {"success": "green", "failure": "red"}.get(found.result, "yellow")
            shown = found.result.upper() + found.shown.removeprefix(found.result)
            write(f"{subject} verdict: {shown}", bold=True, **{colour: True})
            for reason in found.reasons[: 30 if found.result != NOT_CERTIFIED else 1]:
                write(f"  - {headline(reason, 400)}")
        status = self.config.getoption("--accept")
        write(f"result: {self.result}", bold=True)
        if stopped_by := interrupts.interrupted():
            write(
                f"interrupted by {stopped_by} after {time.monotonic() - self.started:.0f}s: "
                "requirements not reached are not-covered"
            )
        judged = self.result  # what the exit status judges beyond accepted known defects
        if known and self.known_failures is not None and self.known_failures.only_known():
            if unaccepted := sorted(self.known_failures.unaccepted()):
                write(
                    f"exit status {EXIT_KNOWN_DEFECT}: every failure is a known upstream defect, not accepted: "
                    f"{', '.join(unaccepted)} (--accept known-defect:ID accepts one explicitly)",
                    red=True,
                    bold=True,
                )
            else:
                judged = self.known_failures.rest()
                write(
                    f"every failure is an accepted known upstream defect: the exit status judges the rest of the run "
                    f"({judged})",
                    red=True,
                    bold=True,
                )
        if judged == "partial":
            if "partial" in status:
                write("partial result accepted (--accept partial): exit status 0", yellow=True, bold=True)
            else:
                write(
                    f"exit status {EXIT_PARTIAL}: a MUST requirement was not shown to pass; pass --accept partial "
                    "for a run that knowingly covers a subset",
                    yellow=True,
                    bold=True,
                )
        if reports_dir := self.config.getoption("--reports-dir"):
            write(f"reports: {Path(reports_dir).resolve()}; {self.packaging}")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    _cluster_summary(terminalreporter, config)
