"""Start and stop the implementation under test from its profile: processes, ports, readiness, logs.

One module per phase, each adding its methods on top of the one before: state.py (what a run holds), resolve.py
(placeholders), manifests.py, process.py (one process or command), stop.py, nodes.py (per-node parts), start.py,
restart.py. Implementation, the handle the suite holds, is all of them; import from here.
"""

from dataclasses import dataclass

from conformance.implementation.harness.restart import Restarting
from conformance.implementation.harness.state import ImplementationFailed, instance_name
from conformance.implementation.harness.stop import INTERRUPTED_STOP_TIMEOUT_S, STOP_TIMEOUT_S


@dataclass
class Implementation(Restarting):
    """The processes of one profile, started in order against one cluster."""


__all__ = ["INTERRUPTED_STOP_TIMEOUT_S", "STOP_TIMEOUT_S", "Implementation", "ImplementationFailed", "instance_name"]
