"""IMP-9 least privilege, for EVERY ServiceAccount of the stack (Profile.accounts(): serviceAccounts,
controller.serviceAccount, and the accounts processes run as with {sa_kubeconfig:...}).

Per account the suite authenticates with a bound token (TokenRequest API) and:
- writes device conditions itself (an account a perNode process runs as: with a token bound to a pod on a node, its
  own-driver claim allocated on that node, as its daemon there), with every verb the account may use on
  resourceclaims/status (update: PUT, patch: a merge PATCH), on claims the admin client allocated in the scheduler's
  place: one to a suite-owned driver (manifests.unique_driver), which must be refused (1.36+,
  resourceclaims/driver), one to the profile's driver but to a pool and device that do not exist, without binding
  conditions, which must be allowed;
- reads its effective rules: a SelfSubjectRulesReview in every namespace of the cluster (rules bound cluster-wide
  show in each), judged against the minimum the KEP's roles need (rights.py MINIMUM);
- asks SelfSubjectAccessReviews over a catalogue of sensitive rights (rights.SENSITIVE), which also catches a right
  an authorizer other than RBAC grants;
- writes, as a server-side dry run, a ResourceSlice of another (suite-owned) driver: create, update, patch and
  delete. RBAC cannot restrict slices by driver, so only admission (e.g. a ValidatingAdmissionPolicy) keeps a pool
  publisher to its own driver's slices; what the cluster admits is what the account can do.
Every right beyond the minimum fails, naming the account and the rule, unless the profile declares it (`rights:`);
the declared ones are printed with IMP-9's result.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import RESOURCE_API, resource_slice, unique_driver
from conformance.cluster.versions import parse_version
from conformance.implementation.profile import Right
from conformance.implementation.serviceaccount import service_account_kubeconfig
from conformance.report.outcomes import NOTE_PROPERTY
from conformance.suite.implementation.nodecredentials import allocate_on, node_bound_client, per_node_accounts
from conformance.suite.implementation.nodecredentials import write_condition as _write_condition
from conformance.suite.implementation.rights import (
    SENSITIVE,
    Item,
    Judgement,
    Rule,
    declaring,
    in_minimum,
    judge,
)
from conformance.suite.scenario import Context, result_fixture, scenario

G, V = "resource.k8s.io", "v1"
STATUS_VERBS = ("update", "patch")
SLICE_VERBS = ("create", "update", "patch", "delete")
GRANULAR_STATUS_AUTHORIZATION = 36  # the minor release from which resourceclaims/driver is checked
RBAC = "rbac.authorization.k8s.io"
REVIEWERS = 8  # reviews in flight at once, per account
K = TypeVar("K")
T = TypeVar("T")


@dataclass
class Account:
    name: str  # NAMESPACE/NAME
    role: str  # what runs as it, from the profile
    # Per verb the account's RBAC grants on resourceclaims/status (update: PUT, patch: PATCH): a stack may write
    # status either way, and the refusal on another driver's claim must hold for each.
    verbs: list[str] = field(default_factory=list)
    own_write: dict[str, str] = field(default_factory=dict)  # verb -> "allowed" or "<status> <message>"
    other_write: dict[str, tuple[int, str]] = field(default_factory=dict)  # verb -> (status, message); 200 allowed
    own_rule: dict[str, bool] = field(default_factory=dict)  # verb -> resourceclaims/driver <scope>:<verb>
    # The account runs per node (a perNode process): judged with a token bound to a pod on `node`, on a claim allocated
    # there, and its own rule is associated-node:<verb> (a central writer's is arbitrary-node:<verb>).
    node: str | None = None
    other_rule: dict[str, bool] = field(default_factory=dict)  # the same for another driver
    slice_writes: dict[str, str] = field(default_factory=dict)  # verb -> "admitted" or the refusal, other driver
    incomplete: list[str] = field(default_factory=list)  # namespaces whose rules review said it is incomplete
    judgement: Judgement = field(default_factory=Judgement)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.role})" if self.role else self.name


@dataclass
class Privilege:
    own_driver: str
    other_driver: str
    version: str  # Kubernetes version of the cluster
    namespaces: list[str] = field(default_factory=list)  # where the rules were reviewed
    accounts: list[Account] = field(default_factory=list)

    @property
    def writers(self) -> list[Account]:
        return [a for a in self.accounts if a.verbs]


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


def _allowed(api: client.ApiClient, group: str, resource: str, verb: str, name: str = "", namespace: str = "") -> bool:
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


def _each(keys: Sequence[K], ask: Callable[[K], T]) -> dict[K, T]:
    """ask(key) for every key, REVIEWERS at a time (one review per namespace adds up on a cluster with many)."""
    with ThreadPoolExecutor(REVIEWERS) as pool:
        return dict(zip(keys, pool.map(ask, keys), strict=True))


def _rules(api: client.ApiClient, namespace: str) -> tuple[list[Rule], bool]:
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


def _slice_writes(api: client.ApiClient, existing: dict[str, Any], driver: str) -> dict[str, str]:
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


def _grants(rbac: client.RbacAuthorizationV1Api, account: str) -> list[tuple[str, str | None, list[Rule]]]:
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


def _attribute(judgement: Judgement, grants: list[tuple[str, str | None, list[Rule]]]) -> None:
    """Name the Role/ClusterRole (and binding) each excess rule comes from."""
    for excess in judgement.excess.values():
        for what, ns, rules in grants:
            held = any(rule.text() == excess.rule for rule in rules) and (ns is None or ns in excess.namespaces)
            if held and what not in excess.granted_by:
                excess.granted_by.append(what)


def _judge_account(
    ctx: Context,
    seen: Account,
    sa_api: client.ApiClient,
    claims: tuple[dict[str, Any], dict[str, Any]],
    other_slice: dict[str, Any],
    namespaces: list[str],
    declared: list[Right],
    baseline: dict[str, list[Rule]],
) -> None:
    own, other = claims
    custom = client.CustomObjectsApi(sa_api)
    driver, other_driver = ctx.profile.driver, other_slice["spec"]["driver"]
    seen.verbs = [v for v in STATUS_VERBS if _allowed(sa_api, G, "resourceclaims/status", v)]
    for verb in seen.verbs:
        status, message = _write_condition(custom, own, verb)
        seen.own_write[verb] = "allowed" if status == 200 else f"{status} {message}"
        own = _reread(ctx, own)  # the next write starts from the claim as it is now (PUT needs its version)
        seen.other_write[verb] = _write_condition(custom, other, verb)
        ctx.say(
            f"least-privilege: {seen.name} {verb} on a claim of another driver answered {seen.other_write[verb][0]}"
        )
        rule = f"{'associated' if seen.node else 'arbitrary'}-node:{verb}"
        seen.own_rule[verb] = _allowed(sa_api, G, "resourceclaims/driver", rule, driver)
        seen.other_rule[verb] = _allowed(sa_api, G, "resourceclaims/driver", f"arbitrary-node:{verb}", other_driver)
    reviews = _each(namespaces, lambda namespace: _rules(sa_api, namespace))
    rules = {namespace: found for namespace, (found, _) in reviews.items()}
    seen.incomplete = [namespace for namespace, (_, incomplete) in reviews.items() if incomplete]
    judge(seen.name, rules, driver, declared, seen.judgement, baseline)
    own_ns = seen.name.split("/")[0]
    asks = [
        (Item(verb, group, resource), namespace)
        for group, resource, verb in SENSITIVE
        for namespace in ("", own_ns)
        if not in_minimum(Item(verb, group, resource), namespace, own_ns, driver)
        and not seen.judgement.covers(group, resource, verb)
    ]
    answers = _each(asks, lambda ask: _allowed(sa_api, ask[0].group, ask[0].resource, ask[0].verb, namespace=ask[1]))
    for (item, namespace), allowed in answers.items():
        if not allowed:
            continue
        right = declaring(item, namespace, seen.name, declared)
        if right is not None:
            seen.judgement.declared[right.text()] = right
        else:
            where = namespace or "every namespace"
            seen.judgement.add(f"allowed by the authorizer in {where} (no RBAC rule shows it)", item, namespace or "*")
    seen.slice_writes = _slice_writes(sa_api, other_slice, other_driver)
    admitted = [v for v, outcome in seen.slice_writes.items() if outcome == "admitted"]
    for verb in admitted:
        item = Item(verb, G, "resourceslices")
        right = declaring(item, "", seen.name, declared)
        if right is not None:
            seen.judgement.declared[right.text()] = right
        else:
            seen.judgement.add(
                f"ResourceSlices of another driver ({other_driver}): dry-run {', '.join(admitted)} admitted",
                Item(verb, G, "resourceslices (another driver's)"),
                "*",
            )


@contextmanager
def _account_client(ctx: Context, account: str) -> Iterator[client.ApiClient]:
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


def _reread(ctx: Context, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    return client.CustomObjectsApi(ctx.cluster.api).get_namespaced_custom_object(
        G, V, meta["namespace"], "resourceclaims", meta["name"]
    )


@scenario(
    "least-privilege",
    "every ServiceAccount of the stack writes conditions for its own driver only and holds no right beyond the "
    "KEP's minimum that the profile does not declare",
    ("IMP-9",),
    controller=("serviceAccount",),
)
def least_privilege(ctx: Context) -> Privilege:
    accounts = ctx.profile.accounts()
    assert accounts  # controller=("serviceAccount",): skipped without one
    seen = Privilege(ctx.profile.driver, unique_driver("imp9"), ctx.cluster.info.version)
    ns = ctx.namespace()
    own = _allocate(ctx, ns, seen.own_driver, "conformance-imp9-no-such-pool", "no-such-device")
    other = _allocate(ctx, ns, seen.other_driver, "pool-0", "device-0")
    other_slice = ctx.objects.create(resource_slice(f"imp9-{ns}", seen.other_driver, "imp9-pool", [], all_nodes=True))
    other_slice = ctx.cluster.api.sanitize_for_serialization(other_slice.to_dict())
    seen.namespaces = sorted(
        {n.metadata.name for n in ctx.cluster.core.list_namespace().items} | {a.split("/")[0] for a in accounts}
    )
    # The dry-run writes an account must be refused are admitted for the admin: a refusal is the account's, not a
    # malformed request's.
    control = _slice_writes(ctx.cluster.api, other_slice, seen.other_driver)
    assert set(control.values()) == {"admitted"}, f"the admin's dry-run writes of a ResourceSlice failed: {control}"
    rbac = client.RbacAuthorizationV1Api(ctx.cluster.api)
    # What every ServiceAccount of this cluster holds (a fresh one, bound to nothing): not the stack's doing.
    fresh = ctx.objects.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "imp9-baseline"}}, ns
    )
    with _account_client(ctx, f"{ns}/{fresh.metadata.name}") as fresh_api:
        baseline = {ns: found for ns, (found, _) in _each(seen.namespaces, lambda n: _rules(fresh_api, n)).items()}
    per_node = per_node_accounts(ctx.profile)
    for account, role in accounts.items():
        found = Account(account, role)
        if account in per_node:  # as its daemon on one node: its own claims are those allocated there
            found.node = sorted(n.name for n in ctx.nodes())[0]
            node_own = allocate_on(ctx, ns, seen.own_driver, found.node, "imp9")
            with node_bound_client(ctx, account, found.node) as sa_api:
                claims = (node_own, other)
                _judge_account(ctx, found, sa_api, claims, other_slice, seen.namespaces, ctx.profile.rights, baseline)
        else:
            with _account_client(ctx, account) as sa_api:
                claims = (own, other)
                _judge_account(ctx, found, sa_api, claims, other_slice, seen.namespaces, ctx.profile.rights, baseline)
        _attribute(found.judgement, _grants(rbac, account))
        ctx.say(
            f"least-privilege: {found.label}: {len(found.judgement.excess)} rules beyond the minimum, "
            f"{len(found.judgement.declared)} declared; another driver's slice: "
            + ", ".join(f"{verb} {outcome[:160]}" for verb, outcome in found.slice_writes.items())
        )
        seen.accounts.append(found)
    return seen


privilege = result_fixture("privilege", "least-privilege")


@pytest.mark.requirement("IMP-9")
def test_condition_write_on_another_drivers_claim_is_refused(privilege: Privilege) -> None:
    writers = privilege.writers
    assert writers, (
        f"none of the stack's accounts {[a.name for a in privilege.accounts]} may update or patch resourceclaims/status"
    )
    allowed = [(a.name, v) for a in writers for v, (status, _) in a.other_write.items() if status == 200]
    if allowed and parse_version(privilege.version).minor < GRANULAR_STATUS_AUTHORIZATION:
        pytest.skip(
            f"Kubernetes {privilege.version} does not authorize status.devices per driver (resourceclaims/driver, "
            f"DRAResourceClaimGranularStatusAuthorization, is 1.{GRANULAR_STATUS_AUTHORIZATION}+): "
            "any writer of resourceclaims/status may write every driver's conditions"
        )
    for account in writers:
        for verb, (status, message) in account.other_write.items():
            assert status != 200, f"{account.label} wrote conditions on a claim of {privilege.other_driver} ({verb})"
            assert status in (403, 422), (
                f"{account.label}: {verb} refused with {status}, expected Forbidden (403, or 422 from the strategy)"
            )
            assert "Forbidden" in message and "resourceclaims/driver" in message, f"{account.label}: {verb}: {message}"
        granted = [v for v, allowed in account.other_rule.items() if allowed]
        assert not granted, (
            f"{account.label}: a SelfSubjectAccessReview allows resourceclaims/driver of {privilege.other_driver}: "
            f"{granted}"
        )


@pytest.mark.requirement("IMP-9")
def test_condition_write_on_its_own_drivers_claim_is_allowed(privilege: Privilege) -> None:
    writers = privilege.writers
    assert writers, (
        f"none of the stack's accounts {[a.name for a in privilege.accounts]} may update or patch resourceclaims/status"
    )
    for account in writers:
        refused = {v: w for v, w in account.own_write.items() if w != "allowed"}
        assert not refused, f"{account.label} refused on its own driver: {refused}"
        scope = "associated-node" if account.node else "arbitrary-node"
        missing = [f"{scope}:{v}" for v, allowed in account.own_rule.items() if not allowed]
        assert not missing, f"{account.label}: no resourceclaims/driver {missing} for {privilege.own_driver}"


@pytest.mark.requirement("IMP-9")
def test_no_rights_beyond_the_minimum(privilege: Privilege, record_property: Any) -> None:
    """Every account's rights beyond rights.MINIMUM are declared in the profile with a reason; the declared ones held
    are printed with the result (record_property: the plugin puts them in the requirement's reason)."""
    problems = []
    for account in privilege.accounts:
        texts = [e.text(privilege.namespaces) for e in account.judgement.excess.values()]
        if texts:
            rules = f"{len(texts)} rule{'s' if len(texts) > 1 else ''}"
            problems.append(f"{account.label} holds {rules} beyond the minimum: " + "; ".join(texts))
    incomplete = [f"{a.name} in {', '.join(a.incomplete)}" for a in privilege.accounts if a.incomplete]
    declared = [text for a in privilege.accounts for text in a.judgement.declared]
    if declared:
        record_property(NOTE_PROPERTY, "declared rights beyond the minimum (profile `rights`): " + "; ".join(declared))
    assert not problems, (
        "; ".join(problems)
        + " (rights.MINIMUM is what the KEP's roles need; declare a right the stack needs in the profile's `rights` "
        + "with the reason)"
        + (f"; rules reviews incomplete (another authorizer): {incomplete}" if incomplete else "")
    )
