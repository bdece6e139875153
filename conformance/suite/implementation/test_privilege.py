"""IMP-9 least privilege, for EVERY ServiceAccount of the stack (Profile.accounts(): serviceAccounts,
controller.serviceAccount, and the accounts processes run as with {sa_kubeconfig:...}).

Per account the suite authenticates with a bound token (TokenRequest API) and, for each part it serves (accountroles.py:
a central part with an unbound token; a per-node part with a token bound to a pod on a node, its own-driver claim
allocated on that node, as its daemon there; one account serving both is judged as both):
- writes device conditions itself, with every verb the account may use on
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
Every right beyond the minimum fails, naming the account and the rule, unless the profile declares it (`rights:`;
another driver's slices only with otherDrivers: true); the declared ones are printed with IMP-9's result. A central
writer lacking resourceclaims/driver arbitrary-node:<verb> fails naming it; a node's daemon holding it fails here for
a fabric stack (RDY-8 judges it for a node-local one), and one account serving both says so, naming both parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from conformance.cluster.manifests import RESOURCE_API, resource_slice, unique_driver
from conformance.cluster.versions import parse_version
from conformance.implementation.profile import Right, Users
from conformance.report.outcomes import NOTE_PROPERTY
from conformance.suite.implementation.accountroles import CENTRAL_SCOPE, NODE_SCOPE, central_missing, node_excess
from conformance.suite.implementation.nodecredentials import allocate_on, node_bound_client
from conformance.suite.implementation.nodecredentials import write_condition as _write_condition
from conformance.suite.implementation.privilege_reviews import (
    account_client,
    allowed,
    attribute,
    each,
    grants,
    reread,
    rules_review,
    slice_writes,
)
from conformance.suite.implementation.rights import SENSITIVE, Item, Judgement, Rule, declaring, in_minimum, judge
from conformance.suite.scenario import Context, result_fixture, scenario

G, V = "resource.k8s.io", "v1"
STATUS_VERBS = ("update", "patch")
GRANULAR_STATUS_AUTHORIZATION = 36  # the minor release from which resourceclaims/driver is checked


@dataclass
class View:
    """The account as one part it serves is seen: central (an unbound token: every claim needs arbitrary-node) or
    node `node`'s daemon (a token bound to a pod there: its node's claims need associated-node)."""

    node: str | None = None
    # Per verb the account's RBAC grants on resourceclaims/status (update: PUT, patch: PATCH): a stack may write
    # status either way, and the refusal on another driver's claim must hold for each.
    own_write: dict[str, str] = field(default_factory=dict)  # verb -> "allowed" or "<status> <message>"
    other_write: dict[str, tuple[int, str]] = field(default_factory=dict)  # verb -> (status, message); 200 allowed
    own_rule: dict[str, bool] = field(default_factory=dict)  # verb -> resourceclaims/driver <scope>:<verb>
    other_rule: dict[str, bool] = field(default_factory=dict)  # the same for another driver (arbitrary-node)
    central_rule: dict[str, bool] = field(default_factory=dict)  # a node's daemon: arbitrary-node:<verb>, own driver
    slice_writes: dict[str, str] = field(default_factory=dict)  # verb -> "admitted" or the refusal, other driver

    @property
    def scope(self) -> str:
        return NODE_SCOPE if self.node else CENTRAL_SCOPE


@dataclass
class Account:
    name: str  # NAMESPACE/NAME
    role: str  # what runs as it, from the profile
    users: Users = field(default_factory=Users)  # its central and per-node parts
    verbs: list[str] = field(default_factory=list)  # resourceclaims/status verbs it holds
    views: list[View] = field(default_factory=list)  # one per kind of part it serves
    incomplete: list[str] = field(default_factory=list)  # namespaces whose rules review said it is incomplete
    judgement: Judgement = field(default_factory=Judgement)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.role})" if self.role else self.name

    def seen_as(self, view: View) -> str:
        if view.node is None:
            return f"{self.label} as a central part" if self.users.per_node else self.label
        return f"{self.name} ({', '.join(self.users.per_node)}) as node {view.node}'s daemon"


@dataclass
class Privilege:
    own_driver: str
    other_driver: str
    version: str  # Kubernetes version of the cluster
    node_local: bool = False  # bindingModel node-local: RDY-8 judges a node's daemon's rights
    namespaces: list[str] = field(default_factory=list)  # where the rules were reviewed
    accounts: list[Account] = field(default_factory=list)
    placed: dict[str, str] = field(default_factory=dict)  # account -> node the scheduler placed its token's pod on

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


def _judge_view(
    ctx: Context,
    seen: Account,
    view: View,
    sa_api: client.ApiClient,
    claims: tuple[dict[str, Any], dict[str, Any]],
    other_slice: dict[str, Any],
) -> None:
    """The writes the part may do: conditions on its own driver's claim and on another's, the driver rules behind
    them, and another driver's slice."""
    own, other = claims
    custom = client.CustomObjectsApi(sa_api)
    driver, other_driver = ctx.profile.driver, other_slice["spec"]["driver"]
    for verb in seen.verbs:
        status, message = _write_condition(custom, own, verb)
        view.own_write[verb] = "allowed" if status == 200 else f"{status} {message}"
        own = reread(ctx, own)  # the next write starts from the claim as it is now (PUT needs its version)
        view.other_write[verb] = _write_condition(custom, other, verb)
        ctx.say(
            f"least-privilege: {seen.seen_as(view)} {verb} on a claim of another driver answered "
            f"{view.other_write[verb][0]}"
        )
        view.own_rule[verb] = allowed(sa_api, G, "resourceclaims/driver", f"{view.scope}:{verb}", driver)
        view.other_rule[verb] = allowed(sa_api, G, "resourceclaims/driver", f"{CENTRAL_SCOPE}:{verb}", other_driver)
        if view.node is not None:
            view.central_rule[verb] = allowed(sa_api, G, "resourceclaims/driver", f"{CENTRAL_SCOPE}:{verb}", driver)
    view.slice_writes = slice_writes(sa_api, other_slice, other_driver)


def _judge_rights(
    ctx: Context, seen: Account, sa_api: client.ApiClient, namespaces: list[str], baseline: dict[str, list[Rule]]
) -> None:
    """The account's rules (every namespace) and the sensitive rights an authorizer allows it, against the minimum."""
    driver, declared = ctx.profile.driver, ctx.profile.rights
    reviews = each(namespaces, lambda namespace: rules_review(sa_api, namespace))
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
    answers = each(asks, lambda ask: allowed(sa_api, ask[0].group, ask[0].resource, ask[0].verb, namespace=ask[1]))
    for (item, namespace), granted in answers.items():
        if not granted:
            continue
        right = declaring(item, namespace, seen.name, declared)
        if right is not None:
            seen.judgement.declared[right.text()] = right
        else:
            where = namespace or "every namespace"
            seen.judgement.add(f"allowed by the authorizer in {where} (no RBAC rule shows it)", item, namespace or "*")


def _other_drivers_slices(seen: Account, other_driver: str, declared: list[Right]) -> None:
    """Another driver's slice writes any part of the account got admitted: excess, unless a right declares other
    drivers' slices (otherDrivers: true; a resourceslices right without it names the stack's own)."""
    admitted = list(
        dict.fromkeys(v for view in seen.views for v, out in view.slice_writes.items() if out == "admitted")
    )
    for verb in admitted:
        right = declaring(Item(verb, G, "resourceslices"), "", seen.name, declared, other_drivers=True)
        if right is not None:
            seen.judgement.declared[right.text()] = right
        else:
            seen.judgement.add(
                f"ResourceSlices of another driver ({other_driver}): dry-run {', '.join(admitted)} admitted",
                Item(verb, G, "resourceslices (another driver's)"),
                "*",
            )


@scenario(
    "least-privilege",
    "every ServiceAccount of the stack writes conditions for its own driver only and holds no right beyond the "
    "KEP's minimum that the profile does not declare",
    ("IMP-9",),
    controller=("serviceAccount",),
)
def least_privilege(ctx: Context) -> Privilege:
    users = ctx.profile.account_users()
    accounts = ctx.profile.accounts()
    assert accounts  # controller=("serviceAccount",): skipped without one
    seen = Privilege(ctx.profile.driver, unique_driver("imp9"), ctx.cluster.info.version)
    seen.node_local = ctx.profile.binding_model == "node-local"
    seen.placed = dict(ctx.implementation.placed)
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
    control = slice_writes(ctx.cluster.api, other_slice, seen.other_driver)
    assert set(control.values()) == {"admitted"}, f"the admin's dry-run writes of a ResourceSlice failed: {control}"
    rbac = client.RbacAuthorizationV1Api(ctx.cluster.api)
    # What every ServiceAccount of this cluster holds (a fresh one, bound to nothing): not the stack's doing.
    fresh = ctx.objects.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "imp9-baseline"}}, ns
    )
    with account_client(ctx, f"{ns}/{fresh.metadata.name}") as fresh_api:
        baseline = {n: found for n, (found, _) in each(seen.namespaces, lambda n: rules_review(fresh_api, n)).items()}
    first_node = sorted(n.name for n in ctx.nodes())[0]
    for account, role in accounts.items():
        found = Account(account, role, users[account])
        with account_client(ctx, account) as sa_api:
            found.verbs = [v for v in STATUS_VERBS if allowed(sa_api, G, "resourceclaims/status", v)]
            _judge_rights(ctx, found, sa_api, seen.namespaces, baseline)
            if found.users.central or not found.users.per_node:  # a central part (what is not per node)
                found.views.append(View())
                _judge_view(ctx, found, found.views[-1], sa_api, (own, other), other_slice)
        if found.users.per_node:  # as its daemon on one node: its own claims are those allocated there
            found.views.append(View(node=first_node))
            node_own = allocate_on(ctx, ns, seen.own_driver, first_node, "imp9")
            with node_bound_client(ctx, account, first_node) as node_api:
                _judge_view(ctx, found, found.views[-1], node_api, (node_own, other), other_slice)
        _other_drivers_slices(found, seen.other_driver, ctx.profile.rights)
        attribute(found.judgement, grants(rbac, account))
        ctx.say(
            f"least-privilege: {found.label}: {len(found.judgement.excess)} rules beyond the minimum, "
            f"{len(found.judgement.declared)} declared; another driver's slice: "
            + "; ".join(
                ", ".join(f"{verb} {outcome[:160]}" for verb, outcome in view.slice_writes.items())
                for view in found.views
            )
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
    allowed_writes = [
        (a.name, v) for a in writers for w in a.views for v, (status, _) in w.other_write.items() if status == 200
    ]
    if allowed_writes and parse_version(privilege.version).minor < GRANULAR_STATUS_AUTHORIZATION:
        pytest.skip(
            f"Kubernetes {privilege.version} does not authorize status.devices per driver (resourceclaims/driver, "
            f"DRAResourceClaimGranularStatusAuthorization, is 1.{GRANULAR_STATUS_AUTHORIZATION}+): "
            "any writer of resourceclaims/status may write every driver's conditions"
        )
    for account in writers:
        for view in account.views:
            label = account.seen_as(view)
            for verb, (status, message) in view.other_write.items():
                assert status != 200, f"{label} wrote conditions on a claim of {privilege.other_driver} ({verb})"
                assert status in (403, 422), (
                    f"{label}: {verb} refused with {status}, expected Forbidden (403, or 422 from the strategy)"
                )
                assert "Forbidden" in message and "resourceclaims/driver" in message, f"{label}: {verb}: {message}"
            granted = [v for v, ok in view.other_rule.items() if ok]
            assert not granted, (
                f"{label}: a SelfSubjectAccessReview allows resourceclaims/driver of {privilege.other_driver}: "
                f"{granted}"
            )


@pytest.mark.requirement("IMP-9")
def test_condition_write_on_its_own_drivers_claim_is_allowed(privilege: Privilege) -> None:
    """Each part an account serves can write its driver's conditions: a central writer on claims of every node
    (arbitrary-node:<verb>), a node's daemon on its node's (associated-node:<verb>)."""
    writers = privilege.writers
    assert writers, (
        f"none of the stack's accounts {[a.name for a in privilege.accounts]} may update or patch resourceclaims/status"
    )
    problems = []
    for account in writers:
        for view in account.views:
            refused = {v: w for v, w in view.own_write.items() if w != "allowed"}
            evidence = f"\n  its writes on a claim of {privilege.own_driver}: {refused}" if refused else ""
            if view.node is None:
                missing = central_missing(
                    account.name, account.users, account.verbs, view.own_rule, privilege.own_driver
                )
                if missing:
                    problems.append(missing + evidence)
                    continue
            else:
                lacks = [f"{NODE_SCOPE}:{v}" for v, ok in view.own_rule.items() if not ok]
                if lacks:
                    label, driver = account.seen_as(view), privilege.own_driver
                    problems.append(f"{label}: no resourceclaims/driver {lacks} for {driver}{evidence}")
                    continue
            if refused:
                problems.append(f"{account.seen_as(view)} refused on its own driver: {refused}")
    assert not problems, "\n".join(problems)


@pytest.mark.requirement("IMP-9")
def test_no_rights_beyond_the_minimum(privilege: Privilege, record_property: Any) -> None:
    """Every account's rights beyond rights.MINIMUM are declared in the profile with a reason; the declared ones held
    are printed with the result (record_property: the plugin puts them in the requirement's reason), and so is where
    the scheduler placed the pod a central process's token is bound to. A node's daemon holding a central writer's
    arbitrary-node:* is judged here for a fabric stack (RDY-8 judges it, on writes, for a node-local one)."""
    problems = []
    for account in privilege.accounts:
        for view in account.views if not privilege.node_local else []:
            granted = [f"{CENTRAL_SCOPE}:{v}" for v, ok in view.central_rule.items() if ok]
            if view.node and (
                text := node_excess(account.name, account.users, view.node, granted, privilege.own_driver)
            ):
                problems.append(text)
    for account in privilege.accounts:
        texts = [e.text(privilege.namespaces) for e in account.judgement.excess.values()]
        if texts:
            rules = f"{len(texts)} rule{'s' if len(texts) > 1 else ''}"
            problems.append(f"{account.label} holds {rules} beyond the minimum: " + "; ".join(texts))
    incomplete = [f"{a.name} in {', '.join(a.incomplete)}" for a in privilege.accounts if a.incomplete]
    declared = [text for a in privilege.accounts for text in a.judgement.declared]
    notes = ["declared rights beyond the minimum (profile `rights`): " + "; ".join(declared)] if declared else []
    notes += [f"{a}: its token's pod was placed by the scheduler on node {n}" for a, n in privilege.placed.items()]
    if notes:
        record_property(NOTE_PROPERTY, "; ".join(notes))
    assert not problems, (
        "; ".join(problems)
        + " (rights.MINIMUM is what the KEP's roles need; declare a right the stack needs in the profile's `rights` "
        + "with the reason)"
        + (f"; rules reviews incomplete (another authorizer): {incomplete}" if incomplete else "")
    )
