"""The pytest plugin: command-line options, the per-test fixtures, and the registration of the session's parts
(conformance/session/: the cluster and scenario fixtures, the requirement reporter, interrupt handling).

Loaded through the `pytest11` entry point, so `pytest conformance/suite` works wherever the package is
installed. Fixtures that need a cluster start it lazily: unit tests never bring one up.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import allure
import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import USER_AGENT, Cluster
from conformance.cluster.defects import ACCEPT_PREFIX, check_accepts
from conformance.cluster.gates import parse_gate_overrides
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.providers import PROVIDERS
from conformance.cluster.providers.base import KIND_NODES, LOCAL_NODES
from conformance.cluster.versions import DEFAULT_VERSION, UnsupportedVersion, parse_version
from conformance.cluster.waits import wait_for
from conformance.implementation.profile import LoadedProfile, ProfileError, load_profile
from conformance.report.catalogue import CATALOGUE, KEP_URL
from conformance.report.evidence import Evidence
from conformance.report.outcomes import PHASE_PROPERTY
from conformance.report.verdict import EXIT_KNOWN_DEFECT, EXIT_PARTIAL
from conformance.session import interrupts as pytest_interrupts

# `from conformance.session.X import name as name`: the session's fixtures and hooks, defined by job in
# conformance/session/, registered as this plugin's own, in the order they had when written here. Listing the modules
# in `pytest_plugins` instead would make pytest rewrite their asserts, which changes the fixtures' failure messages.
from conformance.session.cluster import cluster as cluster
from conformance.session.cluster import control_plane_crashes as control_plane_crashes
from conformance.session.interrupts import pytest_keyboard_interrupt as pytest_keyboard_interrupt
from conformance.session.interrupts import pytest_sessionfinish as pytest_sessionfinish
from conformance.session.metrics import scheduler_metrics as scheduler_metrics
from conformance.session.requirements import RequirementReporter
from conformance.session.scenarios import cluster_scenarios as cluster_scenarios
from conformance.session.scenarios import foreign_free_phase as foreign_free_phase
from conformance.session.scenarios import implementation as implementation
from conformance.session.scenarios import other_driver as other_driver
from conformance.session.scenarios import recorder as recorder
from conformance.session.scenarios import scenarios as scenarios
from conformance.session.scenarios import scenarios_started as scenarios_started
from conformance.session.shared import (
    CLUSTER_RUNNER_KEY,
    CRASH_WINDOW,
    CRASHES_KEY,
    EVIDENCE_KEY,
    NO_PROFILE,
    NO_PROFILE_REASON,
    PROFILE_KEY,
    REPORTER,
    RUNNER_KEY,
    SELECTED_KEY,
)
from conformance.session.terminal import cluster_summary
from conformance.suite.crashwindow import not_judged_if_crashed
from conformance.suite.judged import hand_over
from conformance.suite.phases import CLUSTER_SUITE, phase_of_test
from conformance.suite.record import REGISTRY

NAMESPACE_READY_S = 30.0
DEFAULT_PROFILE = Path(__file__).resolve().parent.parent / "fixtures" / "profiles" / "reference.yaml"


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


def pytest_configure(config: pytest.Config) -> None:
    try:
        check_accepts(config.getoption("--accept"))
    except ValueError as exc:
        raise pytest.UsageError(f"--accept: {exc}") from None
    config.pluginmanager.register(RequirementReporter(config), REPORTER)
    config.pluginmanager.register(CrashWindow(), CRASH_WINDOW)
    config.addinivalue_line("markers", "requirement(id): the catalogue requirement a test checks, e.g. API-2")
    config.addinivalue_line("markers", "run_wide: judged over the whole run's record; runs after every other test")
    config.addinivalue_line("markers", "phase(name): the implementation phase the test's evidence is from")
    pytest_interrupts.install(config)
    try:
        parse_version(config.getoption("--k8s-version"))
    except UnsupportedVersion as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        chosen = config.getoption("--profile")
        config.stash[PROFILE_KEY] = None if chosen == NO_PROFILE else load_profile(chosen)
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    reports = config.getoption("--reports-dir")
    loaded = config.stash[PROFILE_KEY]
    config.stash[EVIDENCE_KEY] = Evidence(
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
    """A test whose scenario failed is decided here, in its call phase (suite/judged.py): judged on what the scenario
    observed before it failed, failed with its error, not judged, or skipped for the profile."""
    __tracebackhide__ = True
    loaded = pyfuncitem.config.stash.get(PROFILE_KEY, None)
    hand_over(pyfuncitem, loaded.profile if loaded is not None else None)


class CrashWindow:
    """An implementation test that failed on a scenario the control plane crashed under is not judged
    (suite/crashwindow.py): the crash is the cluster's (SCH-11), not the implementation's failure. A plugin object of
    its own (registered in pytest_configure): pytest reads only `pytest_`-named hooks, so a second
    pytest_pyfunc_call of this module under another name (specname) was never called (soak, 2026-12-07: IMP-20
    failed under a kube-scheduler panic)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Iterator[None]:
        __tracebackhide__ = True
        try:
            return (yield)
        except (Exception, pytest.fail.Exception) as exc:
            stash = pyfuncitem.config.stash
            runners = [stash[k] for k in (CLUSTER_RUNNER_KEY, RUNNER_KEY) if k in stash]
            not_judged_if_crashed(pyfuncitem, exc, runners, stash.get(CRASHES_KEY, None))
            raise


@pytest.fixture(scope="session")
def run_id() -> str:
    """Labels every object of this run (RUN_LABEL) so the run can find and remove what it made."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def profile(pytestconfig: pytest.Config) -> LoadedProfile:
    """The implementation profile (validated when pytest starts, before any cluster work); tests that need one are
    skipped in a cluster-only run."""
    loaded = pytestconfig.stash[PROFILE_KEY]
    if loaded is None:
        pytest.skip(NO_PROFILE_REASON)
    return loaded


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
    selected = request.config.stash.get(SELECTED_KEY, [])
    if selected or "cluster" in request.fixturenames:  # first: the record covers every scenario from its start
        request.getfixturevalue("recorder")
    if any(not sc.implementation for sc in selected):
        request.getfixturevalue("cluster_scenarios")
    if any(sc.implementation for sc in selected) and request.config.stash[PROFILE_KEY] is not None:
        request.getfixturevalue("scenarios")
    req = CATALOGUE[marker.args[0]]
    record_property("requirement", req.id)
    module = request.node.module.__name__ if request.node.module else ""
    declared = request.node.get_closest_marker("phase")  # a test that says which phase its evidence is from
    phase = declared.args[0] if declared else None
    run_wide = request.node.get_closest_marker("run_wide") is not None
    cluster = module.startswith(CLUSTER_SUITE)
    if cluster or request.config.stash[PROFILE_KEY] is not None:  # a cluster-only run has no implementation phases
        record_property(
            PHASE_PROPERTY, phase or phase_of_test(module, request.fixturenames, REGISTRY, run_wide, cluster)
        )
    record_property("level", req.level)
    record_property("kep_section", req.kep_section)
    allure.dynamic.epic("KEP-5007")
    allure.dynamic.feature(req.area)
    allure.dynamic.story(req.id)
    allure.dynamic.tag(req.level)
    allure.dynamic.link(KEP_URL, name="KEP-5007")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    cluster_summary(terminalreporter, config)
