"""The names a scenario module imports, in one place: the record and its decorator (record.py), the skip rules
(gaps.py), the contexts (context.py, implementation/context.py) and the runner with its result fixture (runner.py).

A scenario is a record plus a function that drives the cluster (and the implementation) and returns what it
observed; the tests of its module assert one requirement each on that observation. Modules of the suite that other
suite modules import take these names from where they are defined, not from here.
"""

from conformance.suite.context import NAMESPACE_READY_S, ClusterContext
from conformance.suite.gaps import profile_gap, profile_needs, skip_for_profile, skip_if_binding_timeout_fixed
from conformance.suite.implementation.context import Context, ImplementationOwes
from conformance.suite.record import REGISTRY, Scenario, Step, known_capabilities, reads_capability, scenario
from conformance.suite.runner import (
    InvariantViolated,
    Progress,
    ScenarioFailed,
    ScenarioRunner,
    result_fixture,
    summarize,
)

__all__ = [
    "NAMESPACE_READY_S",
    "REGISTRY",
    "ClusterContext",
    "Context",
    "ImplementationOwes",
    "InvariantViolated",
    "Progress",
    "Scenario",
    "ScenarioFailed",
    "ScenarioRunner",
    "Step",
    "known_capabilities",
    "profile_gap",
    "profile_needs",
    "reads_capability",
    "result_fixture",
    "scenario",
    "skip_for_profile",
    "skip_if_binding_timeout_fixed",
    "summarize",
]
