"""What each part an account serves needs of `resourceclaims/driver`, and the words IMP-9 and RDY-8 fail with when an
account lacks it or holds too much, above all when ONE account serves a central writer and per-node daemons (one
ServiceAccount shared by a controller Deployment and a DaemonSet of kubelet plugins, as a chart may ship it).

Since 1.36 the API server authorizes a write of status.devices with the synthetic subresource resourceclaims/driver,
named by driver (kep-5007.md "Roles"): `associated-node:update|patch` for a token bound to a pod on the claim's node
(a node's daemon), `arbitrary-node:update|patch` otherwise (a central writer, which must reach claims of every node).
RBAC grants an account, not a part: an account that serves both either lacks what its central writer needs or lets
every node's daemon write other nodes' claims. Pure logic over what the suite observed (test_privilege.py,
test_readiness_privilege.py ask the cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from conformance.implementation.profile import Users

CENTRAL_SCOPE = "arbitrary-node"  # resourceclaims/driver verbs of a writer not on the claim's node
NODE_SCOPE = "associated-node"  # those of a token bound to a pod on the claim's node
SPLIT = (
    "give the per-node daemons a ServiceAccount of their own (resourceclaims/driver associated-node:* only) and keep "
    "arbitrary-node:* for the central writer's"
)


def scoped(scope: str, verbs: Iterable[str]) -> list[str]:
    """resourceclaims/driver verbs of `scope` for each status verb (update: PUT, patch: PATCH)."""
    return [f"{scope}:{verb}" for verb in verbs]


def names(parts: list[str]) -> str:
    return ", ".join(parts) or "nothing the profile names"


def both(account: str, users: Users) -> str:
    """The opening of every message about an account shared by both kinds of part: names both."""
    return (
        f"one account {account} serves a central writer ({names(users.central)}) and per-node daemons "
        f"({names(users.per_node)}): both cannot hold"
    )


def central_missing(
    account: str, users: Users, verbs: Iterable[str], allowed: Mapping[str, bool], driver: str
) -> str | None:
    """IMP-9: the account's central part writes status (it holds `verbs` on resourceclaims/status) but lacks
    arbitrary-node:<verb> of its driver (`allowed`: verb -> a SelfSubjectAccessReview allowed it), so it cannot write
    the conditions of claims on any node but, bound to a pod, its own. None when nothing is missing or no central
    part runs as the account."""
    missing = scoped(CENTRAL_SCOPE, [v for v in verbs if not allowed.get(v)])
    if not missing or not users.central:
        return None
    right = f"resourceclaims/driver {', '.join(missing)} (resourceNames [{driver}])"
    if users.per_node:
        return (
            f"{both(account, users)}: the central writer lacks {right}, which it needs to write status.devices of "
            f"claims on every node; granted to the account, every node's daemon could write other nodes' claims "
            f"(RDY-8): {SPLIT}"
        )
    return (
        f"{account} ({names(users.central)}), a central writer, lacks {right}: it must write status.devices of claims "
        "on every node, and without it the API server refuses its condition writes (403/422 naming "
        f"{CENTRAL_SCOPE}:<verb>)"
    )


def node_excess(account: str, users: Users, node: str, granted: list[str], driver: str) -> str | None:
    """RDY-8 (and IMP-9 for a fabric stack): a node's daemon may write claims of other nodes because its account holds
    arbitrary-node:* of the driver (`granted`); with a central part on the same account, that is the central writer's
    right leaking to every node. None when nothing is granted."""
    if not granted:
        return None
    right = f"resourceclaims/driver {', '.join(granted)} (resourceNames [{driver}])"
    if users.central:
        return (
            f"{both(account, users)}: the account holds {right} for its central writer (claims on every node), so "
            f"each node's daemon may write other nodes' claims too (node {node}'s daemon here): {SPLIT}"
        )
    return (
        f"{account} ({names(users.per_node)}) as node {node}'s daemon holds {right}, a central writer's right: a "
        f"node's daemon needs {NODE_SCOPE}:* only (the API server grants it for claims allocated on its node)"
    )
