"""The stack's ServiceAccounts (IMP-9 judges each, RDY-8 those of per-node parts), what runs as each (central parts,
per-node parts, or both), and the rights the stack declares beyond IMP-9's minimum."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field, model_validator

from conformance.implementation.profile.base import _Strict

ACCOUNT_PATTERN = r"^[a-z0-9-]+/[a-z0-9.-]+$"  # NAMESPACE/NAME of a ServiceAccount
# {sa_kubeconfig:NS/NAME}, {pod_kubeconfig:NS/NAME} or {pod_kubeconfig:NS/NAME@NODE} (NODE may be {node}): the
# account a process runs as
_SA_PLACEHOLDER = re.compile(r"\{(?:sa|pod)_kubeconfig:([a-z0-9-]+/[a-z0-9.-]+)(?:@[^}]*\}?)?\}")


Runs = Literal["central", "per-node", "both"]
RUNS: dict[str, str] = {
    "central": "placed once (a controller, a Deployment's pod): a condition writer there writes claims of every node",
    "per-node": "one per node (a DaemonSet's pods): judged as a node's daemon, with a token bound to a pod on a node",
    "both": "one account for both (as some charts ship it): judged against both needs (IMP-9, RDY-8)",
}


def _runs_description() -> str:
    return "what runs as it: " + "; ".join(f"`{value}`: {meaning}" for value, meaning in RUNS.items())


class ServiceAccount(_Strict):
    """A ServiceAccount a part of the stack runs as (IMP-9 judges every one): e.g. each controller of a split stack
    deployed in the cluster. Processes the suite starts with {sa_kubeconfig:NS/NAME} are judged without being
    listed here."""

    account: Annotated[str, Field(pattern=ACCOUNT_PATTERN, description="NAMESPACE/NAME of the ServiceAccount")]
    role: str | None = Field(None, description="what runs as it (e.g. pool-publisher), shown in the report")
    runs: Runs = Field("central", description=_runs_description())


@dataclass
class Users:
    """What runs as one account: central parts (placed once: a controller, a Deployment's pod) and per-node parts (one
    per node: a perNode process, a DaemonSet's pods), each as the report names it ("process NAME", a role). One account
    serving both must satisfy both: a central condition writer needs to write claims of every node, a node's daemon
    may write only its node's."""

    central: list[str] = field(default_factory=list)
    per_node: list[str] = field(default_factory=list)

    @property
    def shared(self) -> bool:
        return bool(self.central and self.per_node)


class Right(_Strict):
    """A right an account holds beyond the minimum IMP-9 allows (conformance/suite/implementation/rights.py),
    declared with the reason the stack needs it; the report prints it. `group` "" is the core group; `resource` may
    name a subresource (pods/eviction). Declaring resource.k8s.io resourceslices writes declares writing other
    drivers' slices only with otherDrivers: true (RBAC alone grants a pool publisher every driver's slices: it cannot
    restrict them by driver; only an admission policy can); without it a resourceslices right names the stack's own
    driver's slices, and another driver's slice write it admits still fails IMP-9."""

    account: Annotated[
        str, Field(pattern=ACCOUNT_PATTERN, description="NAMESPACE/NAME of the ServiceAccount that holds it")
    ]
    verbs: list[str] = Field(min_length=1, description="the verbs it may use (get, create, patch, ...)")
    group: str = Field("", description='the API group; "" is the core group')
    resource: Annotated[
        str,
        Field(
            pattern=r"^(\*|[a-z0-9.-]+(/[a-z0-9.-]+)?)$",
            description="the resource, or resource/subresource (pods/eviction)",
        ),
    ]
    namespace: str | None = Field(None, description="only in this namespace; none: wherever the account holds it")
    reason: Annotated[str, Field(min_length=10, description="why the stack needs it: IMP-9 prints it with its result")]
    other_drivers: Annotated[
        bool,
        Field(
            alias="otherDrivers",
            description="resource.k8s.io resourceslices only: the right covers OTHER drivers' slices too (what RBAC "
            "grants without an admission policy); without it only the stack's own driver's slices are declared",
        ),
    ] = False

    @model_validator(mode="after")
    def _other_drivers_of_slices(self) -> Right:
        if self.other_drivers and (self.group, self.resource) != ("resource.k8s.io", "resourceslices"):
            raise ValueError("otherDrivers: true is for resource.k8s.io resourceslices (other drivers' slices)")
        return self

    def text(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        whose = " of other drivers" if self.other_drivers else ""
        what = f"{', '.join(self.verbs)} {self.group or 'core'}/{self.resource}{whose}{where}"
        return f"{self.account}: {what} ({self.reason})"
