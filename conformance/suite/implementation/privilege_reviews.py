"""Asking the cluster what a ServiceAccount may do, for IMP-9 and RDY-8: access and rules reviews as the account,
dry-run writes of a ResourceSlice as it, and (as the admin) the Roles and bindings that grant an account a right."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import resource_slice
from conformance.implementation.serviceaccount import service_account_kubeconfig
from conformance.suite.implementation.rights import Judgement, Rule
from conformance.suite.scenario import Context

G, V = "resource.k8s.io", "v1"
SLICE_VERBS = ("create", "update", "patch", "delete")
REVIEWERS = 8  # reviews in flight at once, per account
K = TypeVar("K")
T = TypeVar("T")


def allowed(api: client.ApiClient, group: str, resource: str, verb: str, name: str = "", namespace: str = "") -> bool:
    resource, _, sub = resource.partition("/")
    attributes = {"group": group, "resource": resource, "subresource": sub, "verb": verb, "name": name}
    if namespace:
        attributes["namespace"] = namespace
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
    )
    return bool(review.status.allowed)


def each(keys: Sequence[K], ask: Callable[[K], T]) -> dict[K, T]:
    """ask(key) for every key, REVIEWERS at a time (one review per namespace adds up on a cluster with many)."""
    with ThreadPoolExecutor(REVIEWERS) as pool:
        return dict(zip(keys, pool.map(ask, keys), strict=True))


def rules_review(api: client.ApiClient, namespace: str) -> tuple[list[Rule], bool]:
    """The account's resource rules in `namespace` (cluster-wide bindings included), and whether it is complete."""
    review = client.AuthorizationV1Api(api).create_self_subject_rules_review(
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": namespace}}
    )
    raw = api.sanitize_for_serialization(review.status)
    rules = [Rule.of(r) for r in raw.get("resourceRules") or []]
    # A non-resource rule on every URL comes with cluster-admin-like grants: judged as a wildcard.
    rules += [
        Rule(tuple(r["verbs"]), ("*",), ("*",))
        for r in raw.get("nonResourceRules") or []
        if "*" in r["nonResourceURLs"]
    ]
    return rules, bool(raw.get("incomplete"))


def slice_writes(api: client.ApiClient, existing: dict[str, Any], driver: str) -> dict[str, str]:
    """Dry-run writes of another driver's ResourceSlice as the account: verb -> "admitted" or the refusal."""
    custom = client.CustomObjectsApi(api)
    name = existing["metadata"]["name"]
    fresh = resource_slice(f"{name}-new", driver, "imp9-pool-new", [], all_nodes=True)
    changed = {**existing, "metadata": {**existing["metadata"], "labels": {"imp9": "dry-run"}}}
    attempts = {
        "create": lambda: custom.create_cluster_custom_object(G, V, "resourceslices", fresh, dry_run="All"),
        "update": lambda: custom.replace_cluster_custom_object(G, V, "resourceslices", name, changed, dry_run="All"),
        "patch": lambda: custom.patch_cluster_custom_object(
            G, V, "resourceslices", name, {"metadata": {"labels": {"imp9": "dry-run"}}}, dry_run="All"
        ),
        "delete": lambda: custom.delete_cluster_custom_object(G, V, "resourceslices", name, dry_run="All"),
    }
    out = {}
    for verb in SLICE_VERBS:
        try:
            attempts[verb]()
            out[verb] = "admitted"
        except ApiException as exc:
            out[verb] = f"{exc.status} {_message(exc)}"
    return out


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.reason)


def _subject_matches(subject: Any, namespace: str, name: str) -> bool:
    kind, subject_name = subject.kind, subject.name
    if kind == "ServiceAccount":
        return subject_name == name and subject.namespace == namespace
    if kind == "User":
        return subject_name == f"system:serviceaccount:{namespace}:{name}"
    return kind == "Group" and subject_name in (
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    )


def grants(rbac: client.RbacAuthorizationV1Api, account: str) -> list[tuple[str, str | None, list[Rule]]]:
    """The account's RBAC grants, read by the admin: (what grants, its namespace or None, rules), to name the Role
    or ClusterRole behind a right beyond the minimum."""
    namespace, name = account.split("/")
    out: list[tuple[str, str | None, list[Rule]]] = []
    cluster_roles = {r.metadata.name: r for r in rbac.list_cluster_role().items}

    def rules_of(role: Any) -> list[Rule]:
        return [Rule.of(rbac.api_client.sanitize_for_serialization(r)) for r in role.rules or []] if role else []

    for binding in rbac.list_cluster_role_binding().items:
        if any(_subject_matches(s, namespace, name) for s in binding.subjects or []):
            role = cluster_roles.get(binding.role_ref.name)
            out.append(
                (
                    f"ClusterRole {binding.role_ref.name} (ClusterRoleBinding {binding.metadata.name})",
                    None,
                    rules_of(role),
                )
            )
    for binding in rbac.list_role_binding_for_all_namespaces().items:
        if any(_subject_matches(s, namespace, name) for s in binding.subjects or []):
            ns, ref = binding.metadata.namespace, binding.role_ref
            if ref.kind == "ClusterRole":
                role = cluster_roles.get(ref.name)
            else:
                try:
                    role = rbac.read_namespaced_role(ref.name, ns)
                except ApiException:
                    role = None
            out.append((f"{ref.kind} {ref.name} (RoleBinding {ns}/{binding.metadata.name})", ns, rules_of(role)))
    return out


def attribute(judgement: Judgement, granted: list[tuple[str, str | None, list[Rule]]]) -> None:
    """Name the Role/ClusterRole (and binding) each excess rule comes from (`granted`: what grants() found)."""
    for excess in judgement.excess.values():
        for what, ns, rules in granted:
            held = any(rule.text() == excess.rule for rule in rules) and (ns is None or ns in excess.namespaces)
            if held and what not in excess.granted_by:
                excess.granted_by.append(what)


@contextmanager
def account_client(ctx: Context, account: str) -> Iterator[client.ApiClient]:
    """An API client authenticated as the ServiceAccount NAMESPACE/NAME (a bound token)."""
    namespace, name = account.split("/")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            kubeconfig = service_account_kubeconfig(
                ctx.cluster.info.kubeconfig, ctx.cluster.core, namespace, name, Path(tmp) / "sa.kubeconfig"
            )
        except ApiException as exc:
            if exc.status == 404:
                raise AssertionError(f"the profile names ServiceAccount {account}, which does not exist") from None
            raise
        api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api
    finally:
        api.close()


def reread(ctx: Context, claim: dict[str, Any]) -> dict[str, Any]:
    """The claim as it is now (a PUT needs its current version)."""
    meta = claim["metadata"]
    return client.CustomObjectsApi(ctx.cluster.api).get_namespaced_custom_object(
        G, V, meta["namespace"], "resourceclaims", meta["name"]
    )
