"""The reference profiles' fabric and node driver configs fit the local cluster's nodes (no cluster: configs only).

The local provider labels node-<i> with fabric-<i mod 2>, and the reference's fabric pools select nodes by that label:
a labelled node that its fabric does not list would be offered devices no fabric can attach there (`--nodes 8` once
failed 21 tests of reference-counted that way).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fake_drivers.fabric.config import FabricConfig
from fake_drivers.fabric.config import build_config as fabric_config
from fake_drivers.nodedriver.config import build_config as nodes_config

from conformance.cluster.providers.base import FABRIC_LABEL, default_nodes

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "reference"
MAX_NODES = 8  # what README and `--nodes` promise for the reference profiles


def _fabric() -> FabricConfig:
    return fabric_config(yaml.safe_load((REFERENCE / "fabric.yaml").read_text()))


@pytest.mark.parametrize("count", [1, 4, MAX_NODES])
def test_every_labelled_node_is_on_its_fabric_and_served_by_the_node_driver(count: int) -> None:
    fabric = _fabric()
    nodes = nodes_config(yaml.safe_load((REFERENCE / "nodes.yaml").read_text()))
    for node in default_nodes(count):
        reached = {fab for fab, members in fabric.fabrics.items() if node.name in members}
        assert reached == {node.labels[FABRIC_LABEL]}, f"{node.name}: its label's fabric must list it, alone"
        assert node.name in nodes.nodes, f"{node.name}: the node driver must serve it (hot-plug republish)"


def test_a_ninth_node_is_not_on_the_fabric() -> None:
    """The promise is up to 8: the 9th node is where it ends (README says so)."""
    fabric = _fabric()
    ninth = default_nodes(MAX_NODES + 1)[-1].name
    assert not any(ninth in members for members in fabric.fabrics.values())
