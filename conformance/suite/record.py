"""A scenario's record (name, description, requirements, what the implementation must offer) and the registry its
decorator `scenario` fills.

In the spirit of the Gateway API conformance suite. A scenario drives the cluster and the implementation and
returns what it observed; the tests of its module assert one requirement each on that observation (the runner:
runner.py; what a scenario works with: context.py and implementation/context.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
END = "its end"  # the step of a requirement no declared step gives evidence for: the scenario's whole observation


@dataclass(frozen=True)
class Step:
    """A point of a scenario from which some of its requirements' evidence exists (the scenario marks it reached
    with ctx.step): if the scenario fails later, their tests still judge what it observed so far (docs/reports.md,
    "A failed scenario's requirements")."""

    name: str
    evidence: tuple[str, ...] = ()  # requirements judged once the scenario got here, whatever fails later
    # Requirements whose behaviour the scenario waits for on its way here: a failure before the step is theirs.
    owes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    requirements: tuple[str, ...]
    run: Callable[[Any], Any]  # given a ClusterContext (context.py) or a Context (implementation/context.py)
    module: str
    capabilities: tuple[str, ...] = ()  # profile capabilities it needs (skipped without them)
    probe: bool = False  # needs the profile's fabricProbe
    faults: bool = False  # needs the profile's faultInjector
    # False: certifies the cluster with suite-owned drivers (runs with --profile none; gets a ClusterContext)
    implementation: bool = True
    controller: tuple[str, ...] = ()  # controller fields of the profile it needs ("process", "serviceAccount")
    exclusive: bool = False  # runs alone: it disturbs the shared implementation (restarts it), or must not be disturbed
    # Requirements of the scenario that only the fabric probe can judge (the scenario itself runs without one): they
    # are skipped, and predicted skipped by `profile check`, where the profile declares no fabricProbe.
    probe_for: tuple[str, ...] = ()
    # The same for the readiness probe (bindingModel node-local): requirements judged on what it says is ready.
    readiness_for: tuple[str, ...] = ()
    # Needs a node without node-local devices reached by a fabric pool: the device read waits for one (publishing.py).
    remote: bool = True
    steps: tuple[Step, ...] = ()  # in the order the scenario reaches them (none: every requirement needs its end)
    # Judges how the stack reports a failure: with a profile that declares it never does (promises.reportsFailures:
    # false) it runs without an injector or capability and its requirements fail citing that (declared_failures.py).
    failure_reporting: bool = False
    # Runs in the coexistence phase, beside other drivers' binding-condition claims (suite/phases.py); every other
    # implementation scenario runs in the foreign-free phase after it.
    beside_others: bool = False

    def evidence_step(self, requirement: str) -> str:
        """The step from which `requirement`'s evidence exists (END where no step names it)."""
        return next((s.name for s in self.steps if requirement in s.evidence), END)


REGISTRY: dict[str, Scenario] = {}
# Capabilities a scenario reads in its body (not through `capabilities=`), registered by `reads_capability`: with the
# scenarios' own, every capability a profile may claim (`profile check` refuses one that nothing reads).
READ_CAPABILITIES: set[str] = set()


def reads_capability(name: str) -> str:
    """Register a capability a scenario reads in its body; returns the name."""
    READ_CAPABILITIES.add(name)
    return name


def known_capabilities() -> set[str]:
    """Every capability some registered scenario reads."""
    return {c for s in REGISTRY.values() for c in s.capabilities} | READ_CAPABILITIES


def scenario(
    name: str,
    description: str,
    requirements: tuple[str, ...],
    *,
    capabilities: tuple[str, ...] = (),
    probe: bool = False,
    faults: bool = False,
    implementation: bool = True,
    controller: tuple[str, ...] = (),
    exclusive: bool = False,
    probe_for: tuple[str, ...] = (),
    remote: bool = True,
    readiness_for: tuple[str, ...] = (),
    steps: tuple[Step, ...] = (),
    failure_reporting: bool = False,
    beside_others: bool = False,
) -> Callable[[Callable[[Any], T]], Callable[[Any], T]]:
    """Register a scenario function; the module's tests read its result with `result_fixture`. A scenario with
    implementation=False gets a ClusterContext (no profile, no implementation, no leased devices). `steps`: where
    some requirements' evidence exists before the end, and whose failure a wait on the way is (Step)."""

    named = {r for s in steps for r in (*s.evidence, *s.owes)}
    if unknown := sorted(named - set(requirements)):
        raise ValueError(f"scenario {name!r}: its steps name requirements it does not judge: {unknown}")
    if len({s.name for s in steps}) != len(steps) or END in {s.name for s in steps}:
        raise ValueError(f"scenario {name!r}: step names must be distinct and not {END!r}")

    def register(fn: Callable[[Any], T]) -> Callable[[Any], T]:
        if name in REGISTRY and REGISTRY[name].module != fn.__module__:
            raise ValueError(f"scenario {name!r} is defined twice ({REGISTRY[name].module}, {fn.__module__})")
        REGISTRY[name] = Scenario(
            name,
            description,
            requirements,
            fn,
            fn.__module__,
            capabilities,
            probe,
            faults,
            implementation,
            controller,
            exclusive,
            probe_for,
            readiness_for,
            remote,
            steps,
            failure_reporting,
            beside_others,
        )
        return fn

    return register
