"""API requirements: the KEP's fields (bindsToNode, binding and failure conditions) round-trip through kube-apiserver,
and its validation refuses what the KEP forbids."""

from __future__ import annotations

from conformance.report.catalogue.model import _API, Applies, Doc, Requirement, _r

REQUIREMENTS: tuple[Requirement, ...] = (
    _r("API-1", "api", "MUST", "bindsToNode and binding/failure conditions round-trip", _API),
    _r("API-2", "api", "MUST", "at most 4 binding and 4 failure conditions", _API),
    _r("API-3", "api", "MUST", "binding and failure conditions are set together", _API),
    _r("API-4", "api", "MUST", "no overlap, no duplicates, qualified names only", _API),
    _r("API-5", "api", "MUST", "status.devices only for allocated devices", _API),
    _r("API-6", "api", "MUST", "allocation cannot be rewritten in place, only cleared", _API),
)

APPLIES: dict[str, Applies] = {}  # every binding model

DOCS: dict[str, Doc] = {
    "API-1": Doc(
        "ResourceSlices with `bindsToNode`, `bindingConditions` and `bindingFailureConditions`, and a claim's "
        "allocation result carrying them, are written through the real kube-apiserver and read back unchanged"
    ),
    "API-2": Doc("a fifth binding or failure condition is refused by kube-apiserver, on slices and allocation results"),
    "API-3": Doc("binding conditions without failure conditions (and the reverse) are refused"),
    "API-4": Doc(
        "a condition in both lists, a duplicate, or a name that is not a qualified name is refused, on slices and on "
        "allocation results"
    ),
    "API-5": Doc("`status.devices` may name only devices of the claim's allocation: another device is refused"),
    "API-6": Doc(
        "an allocation cannot be rewritten in place (kube-apiserver refuses the update; the message differs by "
        "release), but it can be cleared"
    ),
}
