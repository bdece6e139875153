"""RDY-8: least privilege per node (node-local readiness gate). A writer that runs per node (every account a perNode
process of the profile runs as) is judged as the API server sees its daemon on one node A: with a token bound to a pod
on A, it
- may not hold `resourceclaims/driver` `arbitrary-node:update|patch` (that is a central controller's right; a node's
  daemon needs `associated-node:*`, which the API server grants only for claims allocated on its node);
- is refused every status write (each verb it holds on resourceclaims/status) on a claim of the profile's driver
  allocated on another node B, where the same write on a claim allocated on A is allowed;
- is refused dry-run writes of the driver's ResourceSlices of another node: creating one for B, one without a node,
  and updating or deleting node B's published slice.
IMP-9 judges the same accounts' rights against the KEP's minimum (rights.py); this adds what "its own node" means.
An account that also serves a central writer (one ServiceAccount for a controller and the per-node daemons) fails here
when it holds the central writer's arbitrary-node:*, saying that both cannot hold (accountroles.py); IMP-9 fails it
when it lacks that right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import resource_slice
from conformance.implementation.profile import Users
from conformance.observe.slices import driver_slices
from conformance.suite.implementation.accountroles import CENTRAL_SCOPE, node_excess
from conformance.suite.implementation.nodecredentials import (
    allocate_on,
    node_bound_client,
    per_node_accounts,
    write_condition,
)
from conformance.suite.implementation.privilege_reviews import allowed, reread
from conformance.suite.implementation.readiness import require_model
from conformance.suite.scenario import Context, result_fixture, scenario

G, V = "resource.k8s.io", "v1"
STATUS_VERBS = ("update", "patch")


@dataclass
class NodeAccount:
    account: str
    users: Users  # its per-node parts, and the central ones when it serves both
    node: str  # the node its token is bound to
    other: str  # another node
    verbs: list[str] = field(default_factory=list)  # resourceclaims/status verbs it holds
    own_write: dict[str, tuple[int, str]] = field(default_factory=dict)
    other_write: dict[str, tuple[int, str]] = field(default_factory=dict)
    arbitrary: dict[str, bool] = field(default_factory=dict)  # arbitrary-node:<verb> allowed
    slice_writes: dict[str, str] = field(default_factory=dict)  # what -> "admitted" or the refusal

    @property
    def label(self) -> str:
        return f"{self.account} ({', '.join(self.users.per_node)}) as node {self.node}'s daemon"


@dataclass
class NodePrivilege:
    driver: str
    accounts: list[NodeAccount] = field(default_factory=list)


def _dry_run(attempt: Any) -> str:
    try:
        attempt()
    except ApiException as exc:
        return f"{exc.status} {str(exc.body)[:300]}"
    return "admitted"


def _slice_writes(api: client.ApiClient, driver: str, other: str, existing: dict[str, Any] | None) -> dict[str, str]:
    custom = client.CustomObjectsApi(api)
    elsewhere = resource_slice(f"rdy8-{other}", driver, f"rdy8-{other}", [], node=other)
    nowhere = resource_slice("rdy8-all-nodes", driver, "rdy8-all-nodes", [], all_nodes=True)
    out = {
        f"create a slice for node {other}": _dry_run(
            lambda: custom.create_cluster_custom_object(G, V, "resourceslices", elsewhere, dry_run="All")
        ),
        "create a slice for all nodes": _dry_run(
            lambda: custom.create_cluster_custom_object(G, V, "resourceslices", nowhere, dry_run="All")
        ),
    }
    if existing is not None:
        name = existing["metadata"]["name"]
        changed = {**existing, "metadata": {**existing["metadata"], "labels": {"rdy8": "dry-run"}}}
        out[f"update node {other}'s slice {name}"] = _dry_run(
            lambda: custom.replace_cluster_custom_object(G, V, "resourceslices", name, changed, dry_run="All")
        )
        out[f"delete node {other}'s slice {name}"] = _dry_run(
            lambda: custom.delete_cluster_custom_object(G, V, "resourceslices", name, dry_run="All")
        )
    return out


@scenario(
    "node-privilege",
    "each per-node writer, with a token bound to a pod on its node, writes only its node's claims and slices",
    ("RDY-8",),
    remote=False,
)
def node_privilege(ctx: Context) -> NodePrivilege:
    require_model(ctx)
    accounts = per_node_accounts(ctx.profile)
    if not accounts:
        pytest.skip(
            "the profile runs no part per node with a ServiceAccount ({sa_kubeconfig} or {pod_kubeconfig} of a "
            "perNode process, a serviceAccounts entry that runs per-node or both): a central condition writer's "
            "privileges are IMP-9's"
        )
    nodes = sorted(n.name for n in ctx.nodes())
    if len(nodes) < 2:
        pytest.skip(f"needs two nodes to tell a node's own claims from another's; the cluster has {nodes}")
    node, other = nodes[0], nodes[1]
    ns = ctx.namespace()
    driver = ctx.profile.driver
    own = allocate_on(ctx, ns, driver, node, "rdy8")
    elsewhere = allocate_on(ctx, ns, driver, other, "rdy8")
    existing = next((s for s in driver_slices(ctx.cluster, driver) if s["spec"].get("nodeName") == other), None)
    seen = NodePrivilege(driver)
    for account, users in accounts.items():
        found = NodeAccount(account, users, node, other)
        with node_bound_client(ctx, account, node) as api:
            custom = client.CustomObjectsApi(api)
            found.verbs = [v for v in STATUS_VERBS if allowed(api, G, "resourceclaims/status", v)]
            for verb in found.verbs:
                found.own_write[verb] = write_condition(custom, reread(ctx, own), verb)
                found.other_write[verb] = write_condition(custom, reread(ctx, elsewhere), verb)
                found.arbitrary[verb] = allowed(api, G, "resourceclaims/driver", f"{CENTRAL_SCOPE}:{verb}", driver)
            found.slice_writes = _slice_writes(api, driver, other, existing)
        ctx.say(
            f"node-privilege: {found.label}: writes on node {other}'s claim "
            + ", ".join(f"{v} {w[0]}" for v, w in found.other_write.items())
        )
        seen.accounts.append(found)
    return seen


privilege = result_fixture("node_privilege", "node-privilege")


@pytest.mark.requirement("RDY-8")
def test_a_nodes_writer_writes_only_its_nodes_claims_and_slices(node_privilege: NodePrivilege) -> None:
    problems = []
    for a in node_privilege.accounts:
        granted = [f"{CENTRAL_SCOPE}:{v}" for v, ok in a.arbitrary.items() if ok]
        excess = node_excess(a.account, a.users, a.node, granted, node_privilege.driver)
        if excess and a.users.central:  # the cause of the writes below: one account for the central writer and all
            problems.append(excess)
        for verb, (status, _) in a.other_write.items():
            if status == 200:
                problems.append(f"{a.label}: {verb} of conditions on a claim allocated on {a.other} was admitted")
        if excess and not a.users.central:
            problems.append(excess)
        if a.verbs and not any(status == 200 for status, _ in a.own_write.values()):
            problems.append(f"{a.label}: refused on a claim allocated on its own node: {a.own_write}")
        admitted = [what for what, outcome in a.slice_writes.items() if outcome == "admitted"]
        if admitted:
            problems.append(f"{a.label}: dry-run slice writes admitted: {admitted}")
    assert not problems, "\n".join(problems)
