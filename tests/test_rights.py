"""IMP-9's judgement of an account's rules against the KEP's minimum (conformance/suite/implementation/rights.py),
and the profile contract that names the accounts and declares rights. Rules are written as a SelfSubjectRulesReview
reports them; no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.implementation.profile import ProfileError, Right, load_profile
from conformance.suite.implementation.rights import Item, Rule, in_baseline, in_minimum, judge

ROOT = Path(__file__).resolve().parents[1]
DRIVER = "gpu.fabric.example.com"
ACCOUNT = "dra-fabric-system/attacher"
EVERYWHERE = ["default", "dra-fabric-system", "workload"]


def rule(verbs: str, group: str, resources: str, names: str = "") -> Rule:
    return Rule.of(
        {
            "verbs": verbs.split(),
            "apiGroups": [group],
            "resources": resources.split(),
            "resourceNames": names.split() if names else None,
        }
    )


def everywhere(*rules: Rule) -> dict[str, list[Rule]]:
    """A ClusterRoleBinding's rules: a rules review shows them in every namespace."""
    return {ns: list(rules) for ns in EVERYWHERE}


REFERENCE = (  # fake-drivers/deploy/rbac.yaml
    rule("get list watch create update delete", "resource.k8s.io", "resourceslices"),
    rule("get list watch", "resource.k8s.io", "resourceclaims"),
    rule("update", "resource.k8s.io", "resourceclaims/status"),
    rule("arbitrary-node:update", "resource.k8s.io", "resourceclaims/driver", DRIVER),
    rule("list", "", "nodes"),
    rule("create", "authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews"),
)


def test_what_a_composable_stack_needs_is_within_the_minimum() -> None:
    found = judge(ACCOUNT, everywhere(*REFERENCE), DRIVER, [])
    assert not found.excess and not found.declared


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (rule("patch", "", "nodes"), "patch core/nodes"),
        (rule("create", "", "pods/eviction"), "create core/pods/eviction"),
        (rule("create", "", "pods/binding"), "create core/pods/binding"),
        (rule("update delete", "resource.k8s.io", "resourceclaims"), "update resource.k8s.io/resourceclaims"),
        (rule("create delete", "resource.k8s.io", "devicetaintrules"), "create resource.k8s.io/devicetaintrules"),
        (rule("impersonate", "", "serviceaccounts"), "impersonate core/serviceaccounts"),
        (rule("escalate bind", "rbac.authorization.k8s.io", "clusterroles"), "escalate rbac.authorization.k8s.io/"),
        (rule("*", "resource.k8s.io", "resourceslices"), "* resource.k8s.io/resourceslices"),
        (rule("get", "*", "*"), "get */*"),
        (rule("arbitrary-node:update", "resource.k8s.io", "resourceclaims/driver"), "resourceclaims/driver"),
        (rule("arbitrary-node:update", "resource.k8s.io", "resourceclaims/driver", "other.example.com"), "driver"),
    ],
)
def test_every_right_beyond_the_minimum_is_named_with_its_rule(extra: Rule, named: str) -> None:
    found = judge(ACCOUNT, everywhere(*REFERENCE, extra), DRIVER, [])
    [excess] = found.excess.values()
    text = excess.text(EVERYWHERE)
    assert named in text and extra.text() in text and "cluster-wide" in text, text


def test_a_namespaced_grant_is_named_with_its_namespace() -> None:
    rules = everywhere(*REFERENCE)
    rules["dra-fabric-system"] = [*REFERENCE, rule("get", "", "secrets")]
    [excess] = judge(ACCOUNT, rules, DRIVER, []).excess.values()
    assert excess.text(EVERYWHERE).startswith("get core/secrets (in namespace dra-fabric-system; rule verbs [get]")


def test_leases_only_in_the_accounts_own_namespace() -> None:
    leases = rule("get create update", "coordination.k8s.io", "leases")
    own = everywhere(*REFERENCE)
    own["dra-fabric-system"] = [*REFERENCE, leases]
    assert not judge(ACCOUNT, own, DRIVER, []).excess
    [excess] = judge(ACCOUNT, everywhere(*REFERENCE, leases), DRIVER, []).excess.values()
    assert "dra-fabric-system" not in excess.namespaces and len(excess.namespaces) == 2


def test_a_declared_right_passes_and_is_reported() -> None:
    right = Right(
        account=ACCOUNT,
        verbs=["create", "delete"],
        group="resource.k8s.io",
        resource="devicetaintrules",
        reason="quarantine of a device whose attach failed",
    )
    found = judge(
        ACCOUNT, everywhere(*REFERENCE, rule("create delete", "resource.k8s.io", "devicetaintrules")), DRIVER, [right]
    )
    assert not found.excess
    assert list(found.declared) == [right.text()] and "quarantine" in right.text()
    other = right.model_copy(update={"account": "dra-fabric-system/publisher"})
    not_this_account = judge(
        ACCOUNT, everywhere(rule("create", "resource.k8s.io", "devicetaintrules")), DRIVER, [other]
    )
    assert not_this_account.excess, "a right declared for another account covers nothing here"
    fewer = right.model_copy(update={"verbs": ["create"]})
    partly = judge(ACCOUNT, everywhere(rule("create delete", "resource.k8s.io", "devicetaintrules")), DRIVER, [fewer])
    [excess] = partly.excess.values()
    assert excess.items == ["delete resource.k8s.io/devicetaintrules"]


def test_the_clusters_baseline_is_not_the_stacks() -> None:
    discovery = rule("get list watch", "certificates.k8s.io", "clustertrustbundles")
    rules = everywhere(*REFERENCE, discovery)
    assert judge(ACCOUNT, rules, DRIVER, []).excess
    assert not judge(ACCOUNT, rules, DRIVER, [], baseline=everywhere(discovery)).excess
    assert not in_baseline(Item("patch", "", "nodes"), [discovery])
    assert not in_baseline(Item("get", "", "configmaps"), [rule("get", "", "configmaps", "one")]), "names narrow it"
    every_sa = rule("get patch", "", "nodes secrets")  # a stack's binding to the group system:serviceaccounts
    caught = judge(ACCOUNT, everywhere(every_sa), DRIVER, [], baseline=everywhere(every_sa))
    [excess] = caught.excess.values()
    assert set(excess.items) == {"patch core/nodes", "get core/secrets", "patch core/secrets"}, excess.items


def test_minimum_driver_rule_needs_the_profiles_driver_by_name() -> None:
    assert in_minimum(
        Item("arbitrary-node:patch", "resource.k8s.io", "resourceclaims/driver", (DRIVER,)), "", "x", DRIVER
    )
    assert not in_minimum(Item("arbitrary-node:patch", "resource.k8s.io", "resourceclaims/driver"), "", "x", DRIVER)
    assert not in_minimum(Item("*", "resource.k8s.io", "resourceslices"), "", "x", DRIVER), "wildcards never"


def _profile(tmp_path: Path, **fields: object) -> Path:
    base = yaml.safe_load((ROOT / "fixtures" / "profiles" / "reference-roles.yaml").read_text())
    base.update(fields)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def test_the_profile_names_every_account_of_a_split_stack(tmp_path: Path) -> None:
    accounts = load_profile(ROOT / "fixtures" / "profiles" / "reference-roles.yaml").profile.accounts()
    assert set(accounts) == {f"dra-fabric-system/{n}" for n in ("pool-publisher", "attacher", "condition-writer")}
    assert accounts["dra-fabric-system/attacher"].startswith("attacher")
    one = load_profile(ROOT / "fixtures" / "profiles" / "reference-external.yaml").profile.accounts()
    assert one == {"dra-fabric-system/reference-controller": "controller"}, "controller.serviceAccount still counts"
    listed = load_profile(_profile(tmp_path, processes=[], roles=[], controller={})).profile.accounts()
    assert set(listed) == set(accounts), "an implementation already running names them in serviceAccounts"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"rights": [{"account": "x/y", "verbs": ["get"], "resource": "secrets", "reason": "a long reason"}]},
            "none of",
        ),
        ({"rights": [{"account": ACCOUNT, "verbs": ["get"], "resource": "secrets"}]}, "reason"),
        ({"rights": [{"account": ACCOUNT, "verbs": [], "resource": "secrets", "reason": "a long reason"}]}, "verbs"),
        (
            {"rights": [{"account": ACCOUNT, "verbs": ["get"], "resource": "Secrets!", "reason": "a long reason"}]},
            "resource",
        ),
        ({"serviceAccounts": [{"account": ACCOUNT}, {"account": ACCOUNT}]}, "each account once"),
        ({"serviceAccounts": [{"account": "no-namespace"}]}, "account"),
        ({"serviceAccounts": [{"account": ACCOUNT, "rol": "x"}]}, "rol"),
    ],
)
def test_bad_accounts_and_rights_are_refused(tmp_path: Path, fields: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        load_profile(_profile(tmp_path, **fields))
