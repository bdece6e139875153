"""Credentials of a writer that runs per node (a perNode process of the profile, a DaemonSet's pod): a token bound to
a pod on one node, as the API server sees that node's daemon. The API server authorizes its status.devices writes with
`resourceclaims/driver` `associated-node:*` for claims allocated on that node (`arbitrary-node:*` elsewhere), and
admission policies read the node from its user info. Used by IMP-9 (a per-node writer writes its own node's claims) and
RDY-8 (and nothing of another node's).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import RESOURCE_API
from conformance.implementation.profile import Profile, Users
from conformance.implementation.serviceaccount import (
    holder_pod_name,
    place_holder_pod,
    remove_holder_pod,
    service_account_kubeconfig,
)
from conformance.suite.implementation.context import Context

G, V = "resource.k8s.io", "v1"


def per_node_accounts(profile: Profile) -> dict[str, Users]:
    """ServiceAccount NAMESPACE/NAME -> what runs as it, for the accounts a per-node part runs as (a perNode process,
    a serviceAccounts entry that runs per-node or both)."""
    return {account: users for account, users in profile.account_users().items() if users.per_node}


@contextmanager
def node_bound_client(ctx: Context, account: str, node: str) -> Iterator[client.ApiClient]:
    """An API client of `account` with a token bound to a pod on `node` (the harness's holder pod where it placed one
    for that account and node: reused, never deleted; else one placed for this and deleted after)."""
    namespace, name = account.split("/")
    core = ctx.cluster.core
    existed = True
    try:
        core.read_namespaced_pod(holder_pod_name(name, node), namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        existed = False
    ref = place_holder_pod(core, namespace, name, node)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = service_account_kubeconfig(
                ctx.cluster.info.kubeconfig, core, namespace, name, Path(tmp) / "node.kubeconfig", bound_to=ref
            )
            api = config.new_client_from_config(config_file=str(path))
        try:
            yield api
        finally:
            api.close()
    finally:
        if not existed:
            remove_holder_pod(core, namespace, ref["name"])


def allocate_on(ctx: Context, ns: str, driver: str, node: str | None, prefix: str) -> dict[str, Any]:
    """A claim of `driver` allocated by the admin client in the scheduler's place, on `node` (the allocation's node
    selector names it, as the scheduler's for a node-local device) or on none; no binding conditions."""
    claim = ctx.objects.create(
        {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {"generateName": f"{prefix}-"},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": driver}}]}},
        },
        ns,
    ).to_dict()
    pool = node or f"{prefix}-no-such-pool"
    allocation: dict[str, Any] = {
        "devices": {
            "results": [{"request": "dev", "driver": driver, "pool": pool, "device": f"{prefix}-no-such-device"}]
        }
    }
    if node is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
    claim["status"] = {"allocation": allocation}
    api = client.CustomObjectsApi(ctx.cluster.api)
    return api.replace_namespaced_custom_object_status(G, V, ns, "resourceclaims", claim["metadata"]["name"], claim)


def write_condition(api: client.CustomObjectsApi, claim: dict[str, Any], verb: str) -> tuple[int, str]:
    """Write one device condition as the ServiceAccount, by PUT (update) or merge PATCH (patch): (200, "") or the
    refusal (status, message)."""
    [result] = claim["status"]["allocation"]["devices"]["results"]
    condition = {
        "type": f"{result['driver']}/conformance-check",
        "status": "True",
        "reason": "Conformance",
        "message": "written by the conformance suite (IMP-9, RDY-8)",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    body = dict(claim)
    body["status"] = dict(claim["status"])
    body["status"]["devices"] = [
        {"driver": result["driver"], "pool": result["pool"], "device": result["device"], "conditions": [condition]}
    ]
    meta = claim["metadata"]
    try:
        if verb == "patch":
            patch = {"status": {"devices": body["status"]["devices"]}}
            api.patch_namespaced_custom_object_status(G, V, meta["namespace"], "resourceclaims", meta["name"], patch)
        else:
            api.replace_namespaced_custom_object_status(G, V, meta["namespace"], "resourceclaims", meta["name"], body)
    except ApiException as exc:
        return exc.status, str(exc.body)
    return 200, ""
