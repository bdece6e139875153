"""The claim shapes of the lifecycle scenarios (suite/implementation/shape.py): each is registered once per shape, the
multi-device one needing the capability multiDeviceClaims, and a let-go names every device on its own."""

from __future__ import annotations

import importlib

import pytest

from conformance.suite.implementation.settle import LetGo
from conformance.suite.implementation.shape import MULTI, shaped_name
from conformance.suite.scenario import REGISTRY

SHAPED = {
    "test_detach": ["detach-on-release"],
    "test_prebind_release": ["prebind-delete-slow", "prebind-delete-hang", "late-attach-after-timeout"],
    "test_fabric_outage": ["fabric-unreachable"],
}


@pytest.mark.parametrize("module", sorted(SHAPED))
def test_each_lifecycle_scenario_is_registered_for_both_claim_shapes(module: str) -> None:
    name = f"conformance.suite.implementation.{module}"
    importlib.import_module(name)
    for scenario in SHAPED[module]:
        one, multi = REGISTRY[shaped_name(scenario, "one")], REGISTRY[shaped_name(scenario, "multi")]
        assert one.module == multi.module == name
        assert MULTI not in one.capabilities and MULTI in multi.capabilities
        assert (one.requirements, one.probe, one.faults) == (multi.requirements, multi.probe, multi.faults)


def test_a_let_go_names_each_device_on_its_own() -> None:
    got = LetGo(["A", "B"], 25.0, gone_s={"A": 3.2}, last={"A": "not attached", "B": "attached on node-3"})
    got.last_seen = "wait ran out"
    problem = got.problem()
    assert "A: detached after 3.2s" in problem and "B: never seen detached; last seen: attached on node-3" in problem
    assert LetGo(["A"], 25.0, after_s=4.0).problem() == ""
