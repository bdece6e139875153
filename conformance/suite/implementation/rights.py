"""IMP-9: the rights a ServiceAccount of the stack holds, judged against the minimum the KEP's roles need.

The minimum (MINIMUM) is the one place that says what a composable stack may hold without saying why. It is the union
of what the roles of kep-5007.md need, granted to every account of the stack alike: the suite cannot tell from a
role's name what it does, and a correct stack may split its work differently (a CoHDI attacher also writes
status.devices[].data), so judging per role would fail correct stacks. Everything else an account holds is a right
beyond the minimum and fails IMP-9, unless the profile declares it with a reason (`rights:`).

Pure logic over the rules a SelfSubjectRulesReview reports (test_privilege.py reads them from the cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from conformance.implementation.profile import Right

READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete", "deletecollection")
DRIVER = "<driver>"  # Allow.names: the profile's driver only
DRA = "resource.k8s.io"


@dataclass(frozen=True)
class Allow:
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: str | None = None  # DRIVER: only with resourceNames that are all the profile's driver
    own_namespace: bool = False  # only in the account's own namespace


MINIMUM: tuple[Allow, ...] = (
    # Every authenticated user may ask what it may do (system:basic-user): the suite's own reviews use it.
    Allow("authorization.k8s.io", ("selfsubjectaccessreviews", "selfsubjectrulesreviews"), ("create",)),
    Allow("authentication.k8s.io", ("selfsubjectreviews",), ("create",)),
    # Every role follows the KEP's flow (kep-5007.md "Design details"): it watches claims (allocation, binding
    # conditions), slices (its pools, node-local copies), classes, taint rules, the nodes devices attach to, and the
    # pods a claim is reserved for. Reading these exposes no credential.
    Allow(
        DRA, ("resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules", "resourceclaimtemplates"), READ
    ),
    Allow("", ("nodes", "pods"), READ),
    # Pool publisher: the fabric pools are ResourceSlices of its driver. RBAC cannot restrict slices by driver, so
    # writes to OTHER drivers' slices are judged apart, by a dry-run write the cluster must refuse (or a right
    # declared with otherDrivers: true).
    Allow(DRA, ("resourceslices",), WRITE),
    # Condition writer: status.devices[] (bindingConditions, bindingFailureConditions, data) of its driver's claims;
    # from 1.36 (DRAResourceClaimGranularStatusAuthorization) also resourceclaims/driver, named by driver.
    Allow(DRA, ("resourceclaims/status",), ("update", "patch")),
    Allow(
        DRA,
        ("resourceclaims/driver",),
        ("arbitrary-node:update", "arbitrary-node:patch", "associated-node:update", "associated-node:patch"),
        names=DRIVER,
    ),
    # Any controller reports what it did as Events (on claims, in their namespaces).
    Allow("", ("events",), ("create", "update", "patch")),
    Allow("events.k8s.io", ("events",), ("create", "update", "patch")),
    # Leader election of a replicated controller: Leases in its own namespace only (elsewhere, e.g. kube-node-lease,
    # a Lease write forges another component's heartbeat).
    Allow("coordination.k8s.io", ("leases",), (*READ, "create", "update", "patch", "delete"), own_namespace=True),
)

# Sensitive rights asked one by one with a SelfSubjectAccessReview (cluster scope and the account's namespace), so a
# right granted by an authorizer other than RBAC (a webhook), which no SelfSubjectRulesReview shows, is caught too:
# (group, resource, verb).
SENSITIVE: tuple[tuple[str, str, str], ...] = (
    ("", "nodes", "update"),
    ("", "nodes", "patch"),
    ("", "nodes", "delete"),
    ("", "pods", "create"),
    ("", "pods", "delete"),
    ("", "pods/eviction", "create"),
    ("", "pods/binding", "create"),
    ("", "secrets", "get"),
    ("", "secrets", "list"),
    ("", "secrets", "watch"),
    ("", "serviceaccounts/token", "create"),
    (DRA, "resourceclaims", "create"),
    (DRA, "resourceclaims", "update"),
    (DRA, "resourceclaims", "patch"),
    (DRA, "resourceclaims", "delete"),
    (DRA, "deviceclasses", "create"),
    (DRA, "deviceclasses", "update"),
    (DRA, "deviceclasses", "delete"),
    (DRA, "devicetaintrules", "create"),
    (DRA, "devicetaintrules", "update"),
    (DRA, "devicetaintrules", "patch"),
    (DRA, "devicetaintrules", "delete"),
    ("", "users", "impersonate"),
    ("", "groups", "impersonate"),
    ("", "serviceaccounts", "impersonate"),
    ("rbac.authorization.k8s.io", "clusterroles", "escalate"),
    ("rbac.authorization.k8s.io", "clusterroles", "bind"),
    ("rbac.authorization.k8s.io", "roles", "escalate"),
    ("rbac.authorization.k8s.io", "roles", "bind"),
    ("*", "*", "*"),
)


@dataclass(frozen=True)
class Rule:
    """One resource rule as a SelfSubjectRulesReview reports it."""

    verbs: tuple[str, ...]
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, raw: dict[str, object]) -> Rule:
        def strings(key: str) -> tuple[str, ...]:
            value = raw.get(key) or ()
            return tuple(sorted(str(v) for v in value)) if isinstance(value, list | tuple) else ()

        return cls(strings("verbs"), strings("apiGroups"), strings("resources"), strings("resourceNames"))

    def text(self) -> str:
        groups = ",".join(g or "core" for g in self.groups)
        names = f" resourceNames [{', '.join(self.names)}]" if self.names else ""
        return f"verbs [{', '.join(self.verbs)}] on {groups}/[{', '.join(self.resources)}]{names}"


@dataclass(frozen=True)
class Item:
    """One (verb, group, resource) a rule grants; '*' where the rule has a wildcard."""

    verb: str
    group: str
    resource: str
    names: tuple[str, ...] = ()

    def text(self) -> str:
        return f"{self.verb} {self.group or 'core'}/{self.resource}"


def expand(rule: Rule) -> list[Item]:
    return [Item(v, g, r, rule.names) for g in rule.groups for r in rule.resources for v in rule.verbs]


def _matches(pattern: str, value: str) -> bool:
    return pattern == "*" or pattern == value


def in_minimum(item: Item, namespace: str, own_namespace: str, driver: str) -> bool:
    """The item is part of MINIMUM where it is held (wildcards never are: they grant what no role needs)."""
    for allow in MINIMUM:
        if item.group != allow.group or item.resource not in allow.resources or item.verb not in allow.verbs:
            continue
        if allow.own_namespace and namespace != own_namespace:
            continue
        if allow.names == DRIVER and (not item.names or any(n != driver for n in item.names)):
            continue
        return True
    return False


def declaring(
    item: Item, namespace: str, account: str, declared: Sequence[Right], other_drivers: bool = False
) -> Right | None:
    """The profile's declaration that covers the item, if any; `other_drivers`: the item is a write of another
    driver's objects (its slices), which only a right with otherDrivers: true declares."""
    for right in declared:
        if right.account != account or (right.namespace and right.namespace != namespace):
            continue
        if other_drivers and not right.other_drivers:
            continue
        verbs_ok = "*" in right.verbs or item.verb in right.verbs
        if verbs_ok and _matches(right.group, item.group) and _matches(right.resource, item.resource):
            return right
    return None


@dataclass
class Excess:
    """Rights beyond the minimum one rule grants the account, and where."""

    rule: str  # Rule.text(), or what the authorizer allowed without a rule
    items: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    granted_by: list[str] = field(default_factory=list)  # Role/ClusterRole and binding, when found

    def text(self, every_namespace: Iterable[str]) -> str:
        everywhere = "*" in self.namespaces or set(self.namespaces) >= set(every_namespace)
        scope = "cluster-wide" if everywhere else f"in namespace {', '.join(sorted(self.namespaces))}"
        source = f", granted by {'; '.join(self.granted_by)}" if self.granted_by else ""
        return f"{', '.join(self.items)} ({scope}; rule {self.rule}{source})"


@dataclass
class Judgement:
    excess: dict[str, Excess] = field(default_factory=dict)  # rule text -> what it grants beyond the minimum
    declared: dict[str, Right] = field(default_factory=dict)  # Right.text() -> the declaration that covered a right

    def add(self, rule: str, item: Item, namespace: str) -> None:
        found = self.excess.setdefault(rule, Excess(rule))
        if item.text() not in found.items:
            found.items.append(item.text())
        if namespace not in found.namespaces:
            found.namespaces.append(namespace)

    def covers(self, group: str, resource: str, verb: str) -> bool:
        """A right an excess rule already names (so a SelfSubjectAccessReview allowing it adds nothing)."""
        for found in self.excess.values():
            for text in found.items:
                v, _, gr = text.partition(" ")
                g, _, r = gr.partition("/")
                g = "" if g == "core" else g
                if _matches(v, verb) and _matches(g, group) and _matches(r, resource):
                    return True
        return False


def sensitive(item: Item) -> bool:
    """A wildcard, a write, or a right of SENSITIVE (e.g. reading secrets)."""
    if "*" in (item.verb, item.group, item.resource) or item.verb not in READ:
        return True
    return any((g, r, v) == (item.group, item.resource, item.verb) for g, r, v in SENSITIVE)


def in_baseline(item: Item, baseline: Iterable[Rule]) -> bool:
    """Every ServiceAccount of the cluster may read it (a fresh account's rules grant it): the cluster's doing, not
    the stack's (e.g. ClusterTrustBundle discovery). Never a sensitive right: a stack that grants one to every
    ServiceAccount (a binding to the group system:serviceaccounts) is still caught."""
    if sensitive(item):
        return False
    for rule in baseline:
        if rule.names and (not item.names or set(item.names) - set(rule.names)):
            continue
        if (
            any(_matches(v, item.verb) for v in rule.verbs)
            and any(_matches(g, item.group) for g in rule.groups)
            and any(_matches(r, item.resource) for r in rule.resources)
        ):
            return True
    return False


def judge(
    account: str,
    rules: dict[str, list[Rule]],
    driver: str,
    declared: Sequence[Right],
    judgement: Judgement | None = None,
    baseline: dict[str, list[Rule]] | None = None,
) -> Judgement:
    """Every right of `account`'s rules (per namespace reviewed) beyond MINIMUM and beyond the cluster's baseline (a
    fresh ServiceAccount's rules, per namespace): declared, or excess."""
    own_namespace = account.split("/")[0]
    out = judgement or Judgement()
    for namespace, found in rules.items():
        for rule in found:
            for item in expand(rule):
                if in_minimum(item, namespace, own_namespace, driver):
                    continue
                if in_baseline(item, (baseline or {}).get(namespace, [])):
                    continue
                right = declaring(item, namespace, account, declared)
                if right is not None:
                    out.declared[right.text()] = right
                else:
                    out.add(rule.text(), item, namespace)
    return out
