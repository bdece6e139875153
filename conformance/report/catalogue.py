"""The requirement catalogue (../shared/design.md): stable ids, RFC 2119 level, area and KEP section.

Every scenario carries one id (`@pytest.mark.requirement("API-2")`); the reports are built per requirement, so a
requirement with no scenario yet shows as "not covered" instead of vanishing.
"""

from __future__ import annotations

from dataclasses import dataclass

KEP_URL = (
    "https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/5007-device-attach-before-pod-scheduled"
)


@dataclass(frozen=True)
class Requirement:
    id: str
    area: str
    level: str  # MUST or SHOULD
    title: str
    kep_section: str


def _r(id_: str, area: str, level: str, title: str, section: str) -> Requirement:
    return Requirement(id_, area, level, title, section)


_API, _SCH, _IMP = "Design Details / API", "Design Details / Scheduler", "Design Details / Composable controller"
REQUIREMENTS: tuple[Requirement, ...] = (
    _r("BASE-1", "baseline", "MUST", "a node-local device without conditions is allocated, bound, Running", _SCH),
    _r("API-1", "api", "MUST", "bindsToNode and binding/failure conditions round-trip", _API),
    _r("API-2", "api", "MUST", "at most 4 binding and 4 failure conditions", _API),
    _r("API-3", "api", "MUST", "binding and failure conditions are set together", _API),
    _r("API-4", "api", "MUST", "no overlap, no duplicates, qualified names only", _API),
    _r("API-5", "api", "MUST", "status.devices only for allocated devices", _API),
    _r("API-6", "api", "MUST", "allocation cannot be rewritten in place, only cleared", _API),
    _r("SCH-1", "scheduler", "MUST", "node-local devices are preferred", _SCH),
    _r("SCH-2", "scheduler", "MUST", "fallback to a fabric device: copied conditions, timestamp, one node", _SCH),
    _r("SCH-3", "scheduler", "MUST", "no binding before all conditions are True", _SCH),
    _r("SCH-4", "scheduler", "MUST", "binds to the allocated node once all conditions are True", _SCH),
    _r("SCH-5", "scheduler", "MUST", "failure condition: deallocated and rescheduled elsewhere", _SCH),
    _r("SCH-6", "scheduler", "MUST", "timeout: not bound, binding timeout, deallocated, recovery", _SCH),
    _r("SCH-7", "scheduler", "MUST", "shared claim: all pods wait, then bind", _SCH),
    _r("SCH-8", "scheduler", "MUST", "multi-device claim: every device's conditions count", _SCH),
    _r("SCH-9", "scheduler", "MUST", "a device is allocated to at most one claim at a time, all run long", _SCH),
    _r("IMP-1", "implementation", "MUST", "fabric devices published with bindsToNode and conditions", _IMP),
    _r("IMP-2", "implementation", "MUST", "attach before bind: attached to that node when the pod binds", _IMP),
    _r("IMP-3", "implementation", "MUST", "conditions set True only after the attach completed", _IMP),
    _r("IMP-4", "implementation", "MUST", "attach failure reported; failed device not offered again", _IMP),
    _r("IMP-5", "implementation", "MUST", "detach on release within the promised time", _IMP),
    _r("IMP-6", "implementation", "MUST", "no physical device offered or held twice", _IMP),
    _r("IMP-7", "implementation", "SHOULD", "AllocationResult rewriting only by deallocation + reallocation", _IMP),
    _r(
        "IMP-8",
        "implementation",
        "MUST",
        "a restart of any role at any step of an attach or detach loses nothing",
        _IMP,
    ),
    _r("IMP-9", "implementation", "SHOULD", "least privilege, refused on other drivers' claims", _IMP),
    _r(
        "IMP-10",
        "implementation",
        "MUST",
        "a device stays attached to its pod's node from binding until the pod is gone",
        _IMP,
    ),
    _r("IMP-11", "implementation", "MUST", "binding conditions True only while the fabric says attached there", _IMP),
    _r("IMP-12", "implementation", "MUST", "no attachment outlives its claim; released devices offered again", _IMP),
    _r(
        "IMP-13",
        "implementation",
        "MUST",
        "a pod deleted in PreBind leaves nothing attached; device offered again",
        _IMP,
    ),
    _r(
        "IMP-14",
        "implementation",
        "MUST",
        "an attach completing after the binding timeout: no orphan, the pod binds",
        _IMP,
    ),
    _r(
        "IMP-15",
        "implementation",
        "MUST",
        "fabric manager out of reach: no condition claims an attach; converges",
        _IMP,
    ),
    _r(
        "IMP-16",
        "implementation",
        "SHOULD",
        "a node deleted while a device is attached to it: detached and offered again",
        _IMP,
    ),
    _r(
        "IMP-18",
        "implementation",
        "MUST",
        "claims of several devices and requests: each device attached, reported and let go on its own",
        _IMP,
    ),
    _r(
        "IMP-19",
        "implementation",
        "MUST",
        "a device moved between nodes: detached from the first before attached to the second, no early condition",
        _IMP,
    ),
    _r(
        "IMP-20",
        "implementation",
        "MUST",
        "a shared claim: one attach, every pod binds there, attached until the last pod is gone, then let go",
        _IMP,
    ),
    _r("SCALE-1", "scale", "SHOULD", "many pods waiting in PreBind all bind, none lost", "Test Plan / e2e"),
)
CATALOGUE: dict[str, Requirement] = {r.id: r for r in REQUIREMENTS}
