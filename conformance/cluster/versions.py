"""What each Kubernetes release does for KEP-5007, and which release a version string means.

The table follows ../shared/kep-5007.md ("Feature gates and releases"). Which gates a built binary actually
knows is read from the binary itself (see toolchain.gates); this table only says what we *expect* per minor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_VERSION = "1.37.2"

# kwok release built for every Kubernetes version (newest that builds with the machine's Go).
KWOK_VERSION = "v0.8.0"
# kind release built for the kind provider and for validating kind configs (newest that builds with Go 1.26).
KIND_VERSION = "v0.33.0"

# kube-scheduler's PreBind polls the binding conditions this often, in every supported release (KEP-5007).
PREBIND_POLL_S = 5.0


@dataclass(frozen=True)
class Release:
    """Behaviour of one Kubernetes minor release that the suite adapts to."""

    minor: tuple[int, int]
    latest_patch: str
    binding_conditions_default_on: bool
    # DynamicResourcesArgs.bindingTimeout exists (1.35+); before that the timeout is a fixed 600 s.
    binding_timeout_configurable: bool
    # --runtime-config that serves DeviceTaintRule (used by controllers to keep failed devices out).
    runtime_config: str = ""
    fixed_binding_timeout_seconds: int = 600
    # Gates of conformance.cluster.gates.WANTED_GATES that the release has and that are not GA, read from its
    # pkg/features/kube_features.go: where the binaries cannot be asked (kind), these are the ones to set.
    gates: tuple[str, ...] = ()
    # Wanted gates that are GA with LockToDefault: on, and setting them to false stops the component at start.
    locked_gates: tuple[str, ...] = ()
    # The resource.k8s.io version that serves DeviceTaintRule (with runtime_config where it is not on by default).
    device_taint_rule_version: str = "v1"
    # NominatedNodeNameForExpectation (beta, on since 1.35): the pod shows the chosen node while it waits in PreBind.
    nominates_while_waiting: bool = True
    # kube-scheduler serves scheduler_dra_bindingconditions_allocations_total and ..._wait_duration_seconds (1.36+,
    # kubernetes PR #137284; registered only with DRADeviceBindingConditions on): cluster/metrics.py, SCH-10.
    bindingconditions_metrics: bool = True

    @property
    def name(self) -> str:
        return f"{self.minor[0]}.{self.minor[1]}"

    def gate_off_reason(self, gate: str) -> str | None:
        """Why `gate` cannot be turned off on this release (None: it can)."""
        if gate in self.locked_gates:
            return (
                f"{gate} is GA and locked on in Kubernetes {self.name} (pkg/features/kube_features.go: "
                f"LockToDefault): --feature-gates {gate}=false is a start error of every component"
            )
        return None


_TAINT_RULES_GATES = (
    "DRAResourceClaimDeviceStatus",
    "DRADeviceBindingConditions",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
)

RELEASES: dict[tuple[int, int], Release] = {
    (1, 34): Release(
        (1, 34),
        "1.34.4",
        binding_conditions_default_on=False,
        binding_timeout_configurable=False,
        runtime_config="resource.k8s.io/v1alpha3=true",
        gates=("DRAResourceClaimDeviceStatus", "DRADeviceBindingConditions", "DRADeviceTaints"),
        device_taint_rule_version="v1alpha3",
        nominates_while_waiting=False,
        bindingconditions_metrics=False,
    ),
    (1, 35): Release(
        (1, 35),
        "1.35.4",
        binding_conditions_default_on=False,
        binding_timeout_configurable=True,
        runtime_config="resource.k8s.io/v1alpha3=true",
        gates=_TAINT_RULES_GATES,
        device_taint_rule_version="v1alpha3",
        bindingconditions_metrics=False,
    ),
    (1, 36): Release(
        (1, 36),
        "1.36.3",
        binding_conditions_default_on=True,
        binding_timeout_configurable=True,
        runtime_config="resource.k8s.io/v1beta2/devicetaintrules=true",
        gates=_TAINT_RULES_GATES,
        device_taint_rule_version="v1beta2",
    ),
    (1, 37): Release(
        (1, 37),
        "1.37.2",
        binding_conditions_default_on=True,
        binding_timeout_configurable=True,
        gates=("DRADeviceBindingConditions",),
        locked_gates=("DRAResourceClaimDeviceStatus",),
    ),
    # Read from v1.38.0-beta.0's pkg/features/kube_features.go: DRADeviceBindingConditions GA and locked ("GA in
    # 1.38; remove in 1.41"), DRADeviceTaints and DRADeviceTaintRules locked, DRAResourceClaimDeviceStatus still
    # locked; DynamicResourceAllocation is gone. No wanted gate is left to set; DeviceTaintRule is served as v1.
    (1, 38): Release(
        (1, 38),
        "1.38.0-beta.0",
        binding_conditions_default_on=True,
        binding_timeout_configurable=True,
        locked_gates=(
            "DRAResourceClaimDeviceStatus",
            "DRADeviceBindingConditions",
            "DRADeviceTaints",
            "DRADeviceTaintRules",
        ),
    ),
}

# A release or a pre-release tag of k8s.io/kubernetes: 1.37.2, v1.38.0-beta.0, 1.38.0-rc.1, or a minor alone.
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+)(?:-((?:alpha|beta|rc)\.\d+))?)?$")
# What a server reports: the same, possibly followed by a vendor suffix (v1.37.2-gke.100, v1.37.2+k3s1).
_SERVER_VERSION_RE = re.compile(r"^v?(\d+\.\d+\.\d+(?:-(?:alpha|beta|rc)\.\d+)?)")


class UnsupportedVersion(ValueError):
    """A version string the suite cannot build or run."""


@dataclass(frozen=True)
class KubeVersion:
    """A concrete Kubernetes patch release, e.g. 1.37.2."""

    major: int
    minor: int
    patch: int
    # Pre-release suffix as tagged upstream ("beta.0", "rc.1"); "" for a release.
    pre: str = ""

    @property
    def _suffix(self) -> str:
        return f"-{self.pre}" if self.pre else ""

    @property
    def tag(self) -> str:
        """The k8s.io/kubernetes module version, e.g. v1.37.2 or v1.38.0-beta.0 (also the cache folder)."""
        return f"v{self.major}.{self.minor}.{self.patch}{self._suffix}"

    @property
    def staging_tag(self) -> str:
        """The version of the k8s.io staging modules (api, client-go, ...), e.g. v0.37.2 or v0.38.0-beta.0."""
        return f"v0.{self.minor}.{self.patch}{self._suffix}"

    @property
    def release(self) -> Release:
        return RELEASES[(self.major, self.minor)]

    def __str__(self) -> str:
        return self.tag.removeprefix("v")


def parse_version(text: str) -> KubeVersion:
    """Parse "1.37.2", "v1.37.2", "1.38.0-beta.0" or "1.37" (the newest version the suite knows for that minor)."""
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise UnsupportedVersion(
            f"not a Kubernetes version: {text!r} (expected e.g. 1.37.2, 1.38.0-beta.0, 1.38.0-rc.1 or 1.37)"
        )
    major, minor = int(match[1]), int(match[2])
    if (major, minor) not in RELEASES:
        known = ", ".join(f"{a}.{b}" for a, b in sorted(RELEASES))
        raise UnsupportedVersion(f"Kubernetes {major}.{minor} is not supported; supported minors: {known}")
    if match[3] is None:
        return parse_version(RELEASES[(major, minor)].latest_patch)
    return KubeVersion(major, minor, int(match[3]), match[4] or "")


def parse_server_version(git_version: str) -> KubeVersion:
    """The version a server reports (/version gitVersion), vendor suffixes dropped, pre-release kept."""
    match = _SERVER_VERSION_RE.match(git_version.strip())
    if not match:
        raise UnsupportedVersion(f"not a Kubernetes version: {git_version!r}")
    return parse_version(match[1])


def supported_minors() -> str:
    """The supported minors as a range for messages, e.g. 1.34-1.38."""
    minors = sorted(RELEASES)
    return f"{minors[0][0]}.{minors[0][1]}-{minors[-1][0]}.{minors[-1][1]}"
