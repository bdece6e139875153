"""Why a scenario, or one requirement of it, cannot be judged here: what the profile does not offer, or a binding
timeout the cluster fixes. Shared by the runner, the tests and `dra-conformance profile check`."""

from __future__ import annotations

import pytest

from conformance.cluster.providers.base import ClusterInfo
from conformance.implementation.profile import Profile
from conformance.suite.record import REGISTRY, Scenario


def profile_gap(sc: Scenario, profile: Profile, requirement: str | None = None) -> str | None:
    """Why an implementation scenario (or, given `requirement`, that requirement of it) cannot be judged with this
    profile (its skip reason), or None. Shared by the runner, the tests (requirement_gap) and `dra-conformance
    profile check`, so the check predicts exactly what a run will skip for the profile. A failure scenario of a stack
    that declares it never reports failures has no gap: it is judged on the declaration (and fails)."""
    if sc.failure_reporting and not profile.promises.reports_failures:
        return None
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
    declared = " (or `promises.reportsFailures: false`, which fails it)" if sc.failure_reporting else ""
    needs += [f"a `faultInjector`{declared}"] if sc.faults else []
    needs += ["a restartable role (`roles` or `controller.process`)"] if "process" in sc.controller else []
    account = "a ServiceAccount (`serviceAccounts`, `controller.serviceAccount`, or `{sa_kubeconfig:...}` of a process)"
    needs += [account] if "serviceAccount" in sc.controller else []
    return needs


def skip_for_profile(scenario: str, requirement: str, profile: Profile) -> None:
    """A test of `requirement` fed by `scenario`: skipped for what the profile does not offer (profile_gap)."""
    if reason := profile_gap(REGISTRY[scenario], profile, requirement):
        pytest.skip(reason)


def skip_if_binding_timeout_fixed(info: ClusterInfo) -> None:
    """Scenarios that wait for the scheduler's binding timeout cannot wait out a fixed one (1.34: 600 s)."""
    if not info.binding_timeout_configurable:
        pytest.skip(
            f"Kubernetes {info.version} fixes the binding timeout at {info.binding_timeout_s}s: too long to wait"
        )
