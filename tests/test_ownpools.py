"""Unit tests of naming the suite's own pools and drivers in the implementation's log lines (suite/ownpools.py), on
synthetic slice summaries and log lines (CoHDI's scaler logged "unknown device name: a-fabric")."""

from __future__ import annotations

from conformance.suite.ownpools import annotate, mentioned, suite_names, summary

OWN = "gpu.fabric.example.com"
SCH = "sch-1a2b3c4d.conformance.example.com"
OTHER = "other-5e6f7a8b.conformance.example.com"
SLICES = [
    {"driver": SCH, "pool": "a-fabric"},
    {"driver": SCH, "pool": "z-local"},
    {"driver": OTHER, "pool": "other-driver-fabric"},
    {"driver": "api-0a0b0c0d.conformance.example.com", "pool": "fabric-0"},
    {"driver": OWN, "pool": "fabric-0"},  # the implementation's own pool of the same name
    {"driver": "gpu.nvidia.com", "pool": "node-1"},  # a real driver of the cluster: not the suite's
]


def test_suite_owned_pools_and_drivers_are_named_with_whose_they_are() -> None:
    names = suite_names(SLICES, OWN)
    assert names["a-fabric"] == f"a pool of the suite's cluster scenarios (driver {SCH})"
    assert names["other-driver-fabric"].startswith("a pool of the suite's coexistence check (IMP-17")
    assert names[SCH] == "a driver played by the suite's cluster scenarios"
    assert "fabric-0" not in names, "the implementation publishes a pool of that name itself"
    assert "node-1" not in names and "gpu.nvidia.com" not in names


def test_a_log_line_naming_a_suite_pool_is_followed_by_whose_it_is() -> None:
    names = suite_names(SLICES, OWN)
    lines = [
        "  [scaler] reconcile failed: unknown device name: a-fabric.",
        "  [scaler] pool a-fabric-2 of driver x: fine",  # another name that starts like it
        f"  [controller] claim ns/c: pool other-driver-fabric of driver {OTHER} is not one of ours",
        "  [controller] attached a-fabric.example/0",  # part of a longer name
    ]
    out = annotate(lines, names)
    assert out[1] == f"    ^ a-fabric: a pool of the suite's cluster scenarios (driver {SCH}), not the implementation's"
    assert out[2] == lines[1] and out[3] == lines[2]
    assert out[4].startswith(f"    ^ {OTHER}: a driver played by the suite's coexistence check")
    assert out[5].startswith("    ^ other-driver-fabric: a pool of the suite's coexistence check")
    assert out[6] == lines[3] and len(out) == 7
    found = mentioned(lines, names)
    assert found == ["a-fabric", OTHER, "other-driver-fabric"]
    assert summary(names, found) == (
        "pool a-fabric: the suite's cluster scenarios; driver other-5e6f7a8b.conformance.example.com, pool "
        "other-driver-fabric: the suite's coexistence check (IMP-17: another driver live beside the implementation)"
    )
    again = annotate([lines[0], lines[0]], names)
    assert len(again) == 3, "a name repeated pass after pass is said once"
