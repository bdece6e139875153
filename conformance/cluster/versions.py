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
    ),
    (1, 35): Release(
        (1, 35),
        "1.35.4",
        binding_conditions_default_on=False,
        binding_timeout_configurable=True,
        runtime_config="resource.k8s.io/v1alpha3=true",
        gates=_TAINT_RULES_GATES,
    ),
    (1, 36): Release(
        (1, 36),
        "1.36.3",
        binding_conditions_default_on=True,
        binding_timeout_configurable=True,
        runtime_config="resource.k8s.io/v1beta2/devicetaintrules=true",
        gates=_TAINT_RULES_GATES,
    ),
    (1, 37): Release(
        (1, 37),
        "1.37.2",
        binding_conditions_default_on=True,
        binding_timeout_configurable=True,
        gates=("DRADeviceBindingConditions",),
    ),
}

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


class UnsupportedVersion(ValueError):
    """A version string the suite cannot build or run."""


@dataclass(frozen=True)
class KubeVersion:
    """A concrete Kubernetes patch release, e.g. 1.37.2."""

    major: int
    minor: int
    patch: int

    @property
    def tag(self) -> str:
        """The k8s.io/kubernetes module version, e.g. v1.37.2."""
        return f"v{self.major}.{self.minor}.{self.patch}"

    @property
    def staging_tag(self) -> str:
        """The version of the k8s.io staging modules (api, client-go, ...), e.g. v0.37.2."""
        return f"v0.{self.minor}.{self.patch}"

    @property
    def release(self) -> Release:
        return RELEASES[(self.major, self.minor)]

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_version(text: str) -> KubeVersion:
    """Parse "1.37.2", "v1.37.2" or "1.37" (the newest patch the suite knows for that minor)."""
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise UnsupportedVersion(f"not a Kubernetes version: {text!r} (expected e.g. 1.37.2 or 1.37)")
    major, minor = int(match[1]), int(match[2])
    if (major, minor) not in RELEASES:
        known = ", ".join(f"{a}.{b}" for a, b in sorted(RELEASES))
        raise UnsupportedVersion(f"Kubernetes {major}.{minor} is not supported; supported minors: {known}")
    if match[3] is None:
        return parse_version(RELEASES[(major, minor)].latest_patch)
    return KubeVersion(major, minor, int(match[3]))
