"""Accounts judged for every part they serve (issue 36 item 4): what runs as each account, central or per node
(Profile.account_users), the words IMP-9 and RDY-8 fail with when one account serves a central writer and per-node
daemons (conformance/suite/implementation/accountroles.py), and a declared `resourceslices` right that excuses only
what it names. Synthetic data; no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.implementation.profile import ProfileError, Right, Users, load_profile
from conformance.suite.implementation import test_privilege, test_readiness_privilege
from conformance.suite.implementation.accountroles import central_missing, node_excess
from conformance.suite.implementation.nodecredentials import per_node_accounts
from conformance.suite.implementation.rights import Item, declaring
from conformance.suite.implementation.test_privilege import Account, Privilege, View
from conformance.suite.implementation.test_readiness_privilege import NodeAccount, NodePrivilege

ROOT = Path(__file__).resolve().parents[1]
DRIVER = "gpu.example.com"
SHARED = "my-system/my-driver"
BOTH = Users(central=["process controller"], per_node=["process kubelet-plugin"])


NODELOCAL = yaml.safe_load((ROOT / "fixtures" / "profiles" / "reference-nodelocal.yaml").read_text())


def _profile(tmp_path: Path, **fields: object) -> Path:
    """reference-nodelocal.yaml with `fields` replaced."""
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**NODELOCAL, **fields}))
    return tmp_path / "p.yaml"


def test_one_account_for_a_scheduled_controller_and_a_daemonset_serves_both(tmp_path: Path) -> None:
    """The upstream example driver's chart: one ServiceAccount for the controller Deployment (placed by the scheduler,
    a pod-bound token) and the DaemonSet of kubelet plugins."""
    manager, readier = NODELOCAL["processes"]
    controller = {
        "name": "controller",
        "command": ["sleep", "600"],
        "kubeconfig": "{pod_kubeconfig:dra-nodelocal-system/reference-node-readier}",
    }
    prof = load_profile(_profile(tmp_path, processes=[manager, readier, controller])).profile
    account = "dra-nodelocal-system/reference-node-readier"
    users = prof.account_users()[account]
    assert users == Users(central=["process controller"], per_node=["process node-readier"]) and users.shared
    assert per_node_accounts(prof) == {account: users}
    assert prof.accounts()[account] == "process node-readier, process controller"


@pytest.mark.parametrize(
    ("runs", "central", "per_node"),
    [("central", ["controller"], []), ("per-node", [], ["controller"]), ("both", ["controller"], ["controller"])],
)
def test_a_service_account_entry_says_what_runs_as_it(
    tmp_path: Path, runs: str, central: list[str], per_node: list[str]
) -> None:
    entry = {"account": SHARED, "role": "controller", "runs": runs}
    prof = load_profile(_profile(tmp_path, serviceAccounts=[entry])).profile
    assert prof.account_users()[SHARED] == Users(central=central, per_node=per_node)


def test_a_central_writer_lacking_its_right_is_told_which() -> None:
    alone = Users(central=["controller", "process controller"])
    text = central_missing("ns/controller", alone, ["update"], {"update": False}, DRIVER)
    assert text is not None
    first = text.splitlines()[0]
    assert first.startswith("ns/controller (controller, process controller), a central writer, lacks")
    assert "resourceclaims/driver arbitrary-node:update (resourceNames [gpu.example.com])" in first
    assert central_missing("ns/controller", alone, ["update"], {"update": True}, DRIVER) is None
    assert central_missing("ns/plugin", Users(per_node=["process p"]), ["update"], {}, DRIVER) is None, "no central"


def test_one_account_for_both_says_both_cannot_hold_naming_both_parts() -> None:
    missing = central_missing(SHARED, BOTH, ["update", "patch"], {"update": False, "patch": False}, DRIVER)
    assert missing is not None
    assert missing.startswith(
        "one account my-system/my-driver serves a central writer (process controller) and per-node daemons "
        "(process kubelet-plugin): both cannot hold: the central writer lacks resourceclaims/driver "
        "arbitrary-node:update, arbitrary-node:patch"
    )
    excess = node_excess(SHARED, BOTH, "node-0", ["arbitrary-node:update"], DRIVER)
    assert excess is not None and "both cannot hold" in excess and "node node-0's daemon" in excess
    assert "process controller" in excess and "process kubelet-plugin" in excess
    assert "arbitrary-node:update" in excess


def test_a_daemon_alone_holding_a_central_right_is_named_as_a_nodes_daemon() -> None:
    text = node_excess("ns/plugin", Users(per_node=["process plugin"]), "node-1", ["arbitrary-node:patch"], DRIVER)
    assert text is not None and text.startswith("ns/plugin (process plugin) as node node-1's daemon holds")
    assert node_excess("ns/plugin", Users(per_node=["process plugin"]), "node-1", [], DRIVER) is None


def _slices_right(**extra: object) -> Right:
    return Right.model_validate(
        {
            "account": SHARED,
            "verbs": ["create", "update"],
            "group": "resource.k8s.io",
            "resource": "resourceslices",
            "reason": "publishes its pools",
            **extra,
        }
    )


def test_a_resourceslices_right_excuses_other_drivers_slices_only_when_it_says_so() -> None:
    write = Item("create", "resource.k8s.io", "resourceslices")
    own = _slices_right()
    assert declaring(write, "", SHARED, [own]) is own, "its own driver's slices"
    assert declaring(write, "", SHARED, [own], other_drivers=True) is None, "not another driver's"
    others = _slices_right(otherDrivers=True)
    assert declaring(write, "", SHARED, [others], other_drivers=True) is others
    assert "resource.k8s.io/resourceslices of other drivers" in others.text()


def test_a_declared_own_slices_right_does_not_excuse_another_drivers_slices_admitted() -> None:
    """IMP-9's judgement of the dry-run writes of another driver's slice (test_privilege._other_drivers_slices): a
    `resourceslices` right without otherDrivers leaves them an excess naming the other driver; with it, declared."""
    for right, excused in ((_slices_right(), False), (_slices_right(otherDrivers=True), True)):
        account = Account(SHARED, "controller", views=[View(slice_writes={"create": "admitted", "delete": "403"})])
        test_privilege._other_drivers_slices(account, "other.example.com", [right])
        if excused:
            assert account.judgement.declared == {right.text(): right} and not account.judgement.excess
        else:
            assert not account.judgement.declared, "a right of the stack's own slices excused another driver's"
            (excess,) = account.judgement.excess.values()
            assert "ResourceSlices of another driver (other.example.com): dry-run create admitted" in excess.rule
            assert excess.items == ["create resource.k8s.io/resourceslices (another driver's)"], excess.items


def test_other_drivers_is_for_slices_only(tmp_path: Path) -> None:
    right = {
        "account": "dra-nodelocal-system/reference-node-readier",
        "verbs": ["create"],
        "group": "resource.k8s.io",
        "resource": "devicetaintrules",
        "otherDrivers": True,
        "reason": "quarantine of a failed device",
    }
    with pytest.raises(ProfileError, match=r"otherDrivers: true is for resource\.k8s\.io resourceslices"):
        load_profile(_profile(tmp_path, rights=[right]))


def _privilege(users: Users, views: list[View], node_local: bool = False) -> Privilege:
    account = Account(SHARED, "controller", users, verbs=["update"], views=views)
    return Privilege(DRIVER, "other.example.com", "1.37.2", node_local, ["default"], [account])


def test_imp9_names_the_missing_right_of_a_shared_accounts_central_writer() -> None:
    central = View(own_write={"update": "422 ... arbitrary-node:update"}, own_rule={"update": False})
    daemon = View(node="node-0", own_write={"update": "allowed"}, own_rule={"update": True})
    with pytest.raises(AssertionError) as caught:
        test_privilege.test_condition_write_on_its_own_drivers_claim_is_allowed(_privilege(BOTH, [central, daemon]))
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"one account {SHARED} serves a central writer (process controller)"), first
    assert "lacks resourceclaims/driver arbitrary-node:update" in first


def test_imp9_fails_a_daemon_holding_a_central_right_on_a_fabric_stack_only() -> None:
    daemon = View(
        node="node-0", own_write={"update": "allowed"}, own_rule={"update": True}, central_rule={"update": True}
    )
    fabric = _privilege(BOTH, [View(own_rule={"update": True}), daemon])
    with pytest.raises(AssertionError, match="both cannot hold: the account holds resourceclaims/driver"):
        test_privilege.test_no_rights_beyond_the_minimum(fabric, lambda *_: None)
    node_local = _privilege(BOTH, [View(own_rule={"update": True}), daemon], node_local=True)
    test_privilege.test_no_rights_beyond_the_minimum(node_local, lambda *_: None)  # RDY-8's to judge


def test_rdy8_puts_the_shared_account_first_then_what_it_let_through() -> None:
    found = NodeAccount(SHARED, BOTH, "node-0", "node-1", verbs=["update"])
    found.own_write = {"update": (200, "")}
    found.other_write = {"update": (200, "")}
    found.arbitrary = {"update": True}
    with pytest.raises(AssertionError) as caught:
        test_readiness_privilege.test_a_nodes_writer_writes_only_its_nodes_claims_and_slices(
            NodePrivilege(DRIVER, [found])
        )
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"one account {SHARED} serves a central writer") and "both cannot hold" in lines[0]
    assert "update of conditions on a claim allocated on node-1 was admitted" in lines[1]
