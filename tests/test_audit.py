"""The API server's refusals of service accounts, read from its audit log (cluster/audit.py): which events count, the
synthetic resourceclaims/driver read from a 422's message, the window and namespace filters, the words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.cluster.audit import POLICY, AuditLog, parse, summarize

CONTROLLER = "system:serviceaccount:dra-fabric-system:reference-controller"
DRIVER_422 = (
    'ResourceClaim.resource.k8s.io "app-gpu-x" is invalid: status.devices: Forbidden: changing status.devices requires '
    'resource="resourceclaims/driver", verb="[arbitrary-node:update]", name="gpu.fabric.example.com"'
)


def _event(
    code: int,
    *,
    user: str = CONTROLLER,
    verb: str = "update",
    resource: str = "resourceclaims",
    subresource: str | None = "status",
    namespace: str = "ns-a",
    at: str = "2026-12-07T00:41:02.000000Z",
    message: str = DRIVER_422,
    uri: str = "/apis/resource.k8s.io/v1/namespaces/ns-a/resourceclaims/app-gpu-x/status",
) -> str:
    ref: dict[str, Any] = {"resource": resource, "namespace": namespace, "name": "app-gpu-x", "apiGroup": "x"}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps(
        {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "stage": "ResponseComplete",
            "verb": verb,
            "requestURI": uri,
            "user": {"username": user, "groups": ["system:serviceaccounts"]},
            "objectRef": ref,
            "responseStatus": {"metadata": {}, "status": "Failure", "message": message, "code": code},
            "requestReceivedTimestamp": at,
            "stageTimestamp": at,
        }
    )


def test_a_status_devices_write_without_the_driver_right_reads_as_the_synthetic_subresource() -> None:
    found = parse(_event(422))
    assert found is not None
    assert (found.account, found.what, found.code) == (
        "dra-fabric-system/reference-controller",
        "update resourceclaims/driver arbitrary-node",
        422,
    )


def test_rbac_refusals_keep_their_subresource_and_successes_and_other_users_are_not_refusals() -> None:
    forbidden = parse(_event(403, verb="patch", message='... cannot patch resource "resourceclaims/status" ...'))
    assert forbidden is not None and forbidden.what == "patch resourceclaims/status"
    slices = parse(_event(403, verb="create", resource="resourceslices", subresource=None, namespace=""))
    assert slices is not None and slices.what == "create resourceslices" and slices.namespace == ""
    assert parse(_event(200)) is None
    assert parse(_event(404)) is None  # not found is no refusal
    assert parse(_event(403, user="kubernetes-admin")) is None
    assert parse("not json") is None


def test_the_log_is_read_incrementally_a_line_being_written_waits(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)
    assert log.refusals(0) == []  # no file yet
    first = _event(422, at="2026-12-07T00:41:02Z")
    half = _event(422, namespace="ns-b", at="2026-12-07T00:41:05Z")
    path.write_text(first + "\n" + _event(200) + "\n" + half[:40])
    assert len(log.refusals(0)) == 1
    with path.open("a") as f:
        f.write(half[40:] + "\n")
    assert [r.namespace for r in log.refusals(0)] == ["ns-a", "ns-b"]


def test_a_window_keeps_its_namespaces_and_cluster_scoped_refusals_of_the_accounts_asked(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    lines = [
        _event(422, namespace="ns-a", at="2026-12-07T00:41:02Z"),
        _event(422, namespace="ns-b", at="2026-12-07T00:41:03Z"),  # another scenario's claim
        _event(403, resource="resourceslices", subresource=None, namespace="", at="2026-12-07T00:41:04Z"),
        _event(422, namespace="ns-a", at="2026-12-07T00:50:00Z"),  # after the window
        _event(422, namespace="ns-a", user="system:serviceaccount:x:other", at="2026-12-07T00:41:05Z"),
    ]
    path.write_text("\n".join(lines) + "\n")
    log = AuditLog(path)
    since = parse(lines[0]).at  # type: ignore[union-attr]
    found = log.refusals(since, since + 60, namespaces={"ns-a"}, accounts={"dra-fabric-system/reference-controller"})
    assert [(r.namespace, r.resource) for r in found] == [("ns-a", "resourceclaims/driver"), ("", "resourceslices")]


def test_refusals_are_summarized_per_account_and_kind_most_frequent_first() -> None:
    refused = [parse(_event(422, at=f"2026-12-07T00:41:{s:02d}Z")) for s in range(37)]
    refused.append(parse(_event(403, verb="create", resource="events", subresource=None)))
    lines = summarize([r for r in refused if r is not None])
    assert lines[0].startswith(
        "update resourceclaims/driver arbitrary-node refused 37 times for dra-fabric-system/reference-controller "
        "(422, 00:41:00-00:41:36 UTC): ResourceClaim"
    )
    assert lines[1].startswith("create events refused once for dra-fabric-system/reference-controller (403, ")
    assert summarize([r for r in refused if r is not None], 1, short=True) == [
        "update resourceclaims/driver arbitrary-node refused 37 times for dra-fabric-system/reference-controller (422)",
        "and 1 more kinds of refusal",
    ]


def test_the_policy_logs_service_accounts_only_once_per_request() -> None:
    assert POLICY["rules"][0] == {"level": "Metadata", "userGroups": ["system:serviceaccounts"]}
    assert POLICY["rules"][-1] == {"level": "None"}
    assert set(POLICY["omitStages"]) == {"RequestReceived", "ResponseStarted"}


def test_a_dry_runs_refusal_is_no_stacks_refusal() -> None:
    """IMP-9 and RDY-8 write with a stack's token on purpose, as dry runs, to see them refused: those refusals must not
    lead another scenario's first line (a node-local run's RDY-5 once read "create resourceslices refused 3 times")."""
    probe = "/apis/resource.k8s.io/v1/resourceslices?dryRun=All"
    assert parse(_event(422, verb="create", resource="resourceslices", subresource=None, uri=probe)) is None
    assert parse(_event(422, verb="create", resource="resourceslices", subresource=None, uri=probe[:-11])) is not None
