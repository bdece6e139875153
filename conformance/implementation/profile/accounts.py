"""The stack's ServiceAccounts (IMP-9 judges each) and the rights it declares beyond IMP-9's minimum."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from conformance.implementation.profile.base import _Strict

ACCOUNT_PATTERN = r"^[a-z0-9-]+/[a-z0-9.-]+$"  # NAMESPACE/NAME of a ServiceAccount
# {sa_kubeconfig:NS/NAME}, {pod_kubeconfig:NS/NAME} or {pod_kubeconfig:NS/NAME@NODE} (NODE may be {node}): the
# account a process runs as
_SA_PLACEHOLDER = re.compile(r"\{(?:sa|pod)_kubeconfig:([a-z0-9-]+/[a-z0-9.-]+)(?:@[^}]*\}?)?\}")


class ServiceAccount(_Strict):
    """A ServiceAccount a part of the stack runs as (IMP-9 judges every one): e.g. each controller of a split stack
    deployed in the cluster. Processes the suite starts with {sa_kubeconfig:NS/NAME} are judged without being
    listed here."""

    account: Annotated[str, Field(pattern=ACCOUNT_PATTERN, description="NAMESPACE/NAME of the ServiceAccount")]
    role: str | None = Field(None, description="what runs as it (e.g. pool-publisher), shown in the report")


class Right(_Strict):
    """A right an account holds beyond the minimum IMP-9 allows (conformance/suite/implementation/rights.py),
    declared with the reason the stack needs it; the report prints it. `group` "" is the core group; `resource` may
    name a subresource (pods/eviction). Declaring resource.k8s.io resourceslices writes declares writing other
    drivers' slices (what RBAC alone grants a pool publisher: it cannot restrict slices by driver)."""

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

    def text(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.account}: {', '.join(self.verbs)} {self.group or 'core'}/{self.resource}{where} ({self.reason})"
