"""IMP-9 least privilege: the controller's ServiceAccount (the profile's controller.serviceAccount) may write
device conditions on claims of its own driver and is refused on claims of another driver, and holds no broad
rights (pods, secrets, claim specs, nodes).

The suite authenticates as that ServiceAccount (a bound token from the TokenRequest API) and makes the writes
itself, on claims the admin client allocated in the scheduler's place: one to a suite-owned driver
(manifests.unique_driver), one to the profile's driver but to a pool and device that do not exist, without
binding conditions, so the controller under test has nothing to do for it. What the ServiceAccount may do in
general is asked with SelfSubjectAccessReviews made with its own token. The writes are made with every verb the
ServiceAccount may use on resourceclaims/status (update: PUT; patch: a merge PATCH, as real stacks write status):
the refusal on another driver's claim must hold for each.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import RESOURCE_API, unique_driver
from conformance.cluster.versions import parse_version
from conformance.implementation.serviceaccount import service_account_kubeconfig
from conformance.suite.scenario import Context, result_fixture, scenario

G, V = "resource.k8s.io", "v1"
# Rights a composable controller has no use for: (group, resource, subresource, verb, name).
BROAD: tuple[tuple[str, str, str, str, str], ...] = (
    ("", "pods", "", "delete", ""),
    ("", "pods", "", "create", ""),
    ("", "pods", "binding", "create", ""),
    ("", "secrets", "", "get", ""),
    ("", "secrets", "", "list", ""),
    ("", "secrets", "", "create", ""),
    ("", "nodes", "", "update", ""),
    ("", "nodes", "", "delete", ""),
    (G, "resourceclaims", "", "update", ""),
    (G, "resourceclaims", "", "delete", ""),
    (G, "resourceclaims", "", "create", ""),
    (G, "deviceclasses", "", "create", ""),
    ("rbac.authorization.k8s.io", "clusterroles", "", "escalate", ""),
    ("", "serviceaccounts", "", "impersonate", ""),
)


STATUS_VERBS = ("update", "patch")
GRANULAR_STATUS_AUTHORIZATION = 36  # the minor release from which resourceclaims/driver is checked


@dataclass
class Privilege:
    account: str
    own_driver: str
    other_driver: str
    # Per verb the controller's RBAC grants on resourceclaims/status (update: PUT, patch: PATCH): a controller may
    # write status either way, and the refusal on another driver's claim must hold for each.
    verbs: list[str] = field(default_factory=list)
    own_write: dict[str, str] = field(default_factory=dict)  # verb -> "allowed" or "<status> <message>"
    other_write: dict[str, tuple[int, str]] = field(default_factory=dict)  # verb -> (status, message); 200 allowed
    own_rule: dict[str, bool] = field(default_factory=dict)  # verb -> resourceclaims/driver arbitrary-node:<verb>
    other_rule: dict[str, bool] = field(default_factory=dict)  # the same for another driver
    broad: dict[str, bool] = field(default_factory=dict)  # "verb group/resource[/sub]" -> allowed
    version: str = ""  # Kubernetes version of the cluster


def _allocate(ctx: Context, ns: str, driver: str, pool: str, device: str) -> dict[str, Any]:
    """A claim for `driver`, allocated by the admin client in the scheduler's place (no binding conditions)."""
    claim = ctx.objects.create(
        {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {"generateName": "imp9-"},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": driver}}]}},
        },
        ns,
    ).to_dict()
    claim["status"] = {
        "allocation": {"devices": {"results": [{"request": "dev", "driver": driver, "pool": pool, "device": device}]}}
    }
    api = client.CustomObjectsApi(ctx.cluster.api)
    return api.replace_namespaced_custom_object_status(G, V, ns, "resourceclaims", claim["metadata"]["name"], claim)


def _write_condition(api: client.CustomObjectsApi, claim: dict[str, Any], verb: str) -> tuple[int, str]:
    """Write one device condition as the ServiceAccount, by PUT (update) or merge PATCH (patch): (200, "") or the
    refusal (status, message)."""
    [result] = claim["status"]["allocation"]["devices"]["results"]
    condition = {
        "type": f"{result['driver']}/conformance-check",
        "status": "True",
        "reason": "Conformance",
        "message": "written by the conformance suite (IMP-9)",
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


def _allowed(api: client.ApiClient, group: str, resource: str, sub: str, verb: str, name: str) -> bool:
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "group": group,
                    "resource": resource,
                    "subresource": sub,
                    "verb": verb,
                    "name": name,
                }
            },
        }
    )
    return bool(review.status.allowed)


def _reread(ctx: Context, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    return client.CustomObjectsApi(ctx.cluster.api).get_namespaced_custom_object(
        G, V, meta["namespace"], "resourceclaims", meta["name"]
    )


@scenario(
    "least-privilege",
    "the controller's ServiceAccount writes conditions for its own driver only and has no broad rights",
    ("IMP-9",),
    controller=("serviceAccount",),
)
def least_privilege(ctx: Context) -> Privilege:
    account = ctx.profile.controller.service_account
    assert account is not None  # controller=("serviceAccount",): skipped without one
    sa_ns, sa_name = account.split("/")
    seen = Privilege(account, ctx.profile.driver, unique_driver("imp9"), version=ctx.cluster.info.version)
    ns = ctx.namespace()
    own = _allocate(ctx, ns, seen.own_driver, "conformance-imp9-no-such-pool", "no-such-device")
    other = _allocate(ctx, ns, seen.other_driver, "pool-0", "device-0")
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = service_account_kubeconfig(
            ctx.cluster.info.kubeconfig, ctx.cluster.core, sa_ns, sa_name, Path(tmp) / "sa.kubeconfig"
        )
        sa_api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        custom = client.CustomObjectsApi(sa_api)
        seen.verbs = [v for v in STATUS_VERBS if _allowed(sa_api, G, "resourceclaims", "status", v, "")]
        for verb in seen.verbs:
            status, message = _write_condition(custom, own, verb)
            seen.own_write[verb] = "allowed" if status == 200 else f"{status} {message}"
            own = _reread(ctx, own)  # the next write starts from the claim as it is now (PUT needs its version)
            seen.other_write[verb] = _write_condition(custom, other, verb)
            ctx.say(f"least-privilege: {verb} on a claim of another driver answered {seen.other_write[verb][0]}")
            rule = f"arbitrary-node:{verb}"
            seen.own_rule[verb] = _allowed(sa_api, G, "resourceclaims", "driver", rule, seen.own_driver)
            seen.other_rule[verb] = _allowed(sa_api, G, "resourceclaims", "driver", rule, seen.other_driver)
        for group, resource, sub, verb, name in BROAD:
            key = f"{verb} {group or 'core'}/{resource}{'/' + sub if sub else ''}"
            seen.broad[key] = _allowed(sa_api, group, resource, sub, verb, name)
    finally:
        sa_api.close()
    return seen


privilege = result_fixture("privilege", "least-privilege")


@pytest.mark.requirement("IMP-9")
def test_condition_write_on_another_drivers_claim_is_refused(privilege: Privilege) -> None:
    assert privilege.verbs, f"{privilege.account} may neither update nor patch resourceclaims/status"
    allowed = [v for v, (status, _) in privilege.other_write.items() if status == 200]
    if allowed and parse_version(privilege.version).minor < GRANULAR_STATUS_AUTHORIZATION:
        pytest.skip(
            f"Kubernetes {privilege.version} does not authorize status.devices per driver (resourceclaims/driver, "
            f"DRAResourceClaimGranularStatusAuthorization, is 1.{GRANULAR_STATUS_AUTHORIZATION}+): "
            "any writer of resourceclaims/status may write every driver's conditions"
        )
    for verb, (status, message) in privilege.other_write.items():
        assert status != 200, f"{privilege.account} wrote conditions on a claim of {privilege.other_driver} ({verb})"
        assert status in (403, 422), f"{verb} refused with {status}, expected Forbidden (403, or 422 from the strategy)"
        assert "Forbidden" in message and "resourceclaims/driver" in message, f"{verb}: {message}"
    granted = [v for v, allowed in privilege.other_rule.items() if allowed]
    assert not granted, f"a SelfSubjectAccessReview allows resourceclaims/driver {privilege.other_driver}: {granted}"


@pytest.mark.requirement("IMP-9")
def test_condition_write_on_its_own_drivers_claim_is_allowed(privilege: Privilege) -> None:
    assert privilege.verbs, f"{privilege.account} may neither update nor patch resourceclaims/status"
    refused = {v: w for v, w in privilege.own_write.items() if w != "allowed"}
    assert not refused, f"{privilege.account} refused on its own driver: {refused}"
    missing = [f"arbitrary-node:{v}" for v, allowed in privilege.own_rule.items() if not allowed]
    assert not missing, f"no resourceclaims/driver {missing} for {privilege.own_driver}"


@pytest.mark.requirement("IMP-9")
def test_no_broad_rights(privilege: Privilege) -> None:
    granted = [what for what, allowed in privilege.broad.items() if allowed]
    assert not granted, f"{privilege.account} may {granted}"
