"""The rights a failed scenario's evidence quotes (suite/cause.py): IMP-9's rule for a central writer
(accountroles.central_missing) on what the API server's authorizer gives each account of the stack now, asked with
SubjectAccessReviews by the suite's own client (no token of the account needed, nothing written).

Where the audit log is readable its refusals are the stronger evidence; on an existing cluster this is what is left.
"""

from __future__ import annotations

from kubernetes import client

from conformance.cluster.client import Cluster
from conformance.cluster.versions import parse_version
from conformance.implementation.profile import Profile
from conformance.suite.implementation.accountroles import CENTRAL_SCOPE, central_missing

GRANULAR_STATUS_AUTHORIZATION = 36  # the minor release from which resourceclaims/driver is checked
STATUS_VERBS = ("update", "patch")


def allowed(cluster: Cluster, account: str, resource: str, verb: str, name: str | None = None) -> bool:
    """Whether the authorizer allows service account NAMESPACE/NAME `verb` on resource.k8s.io `resource`
    (resource/subresource), named `name`, as a central part (a token bound to no node)."""
    ns, sa = account.split("/", 1)
    plural, _, sub = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{ns}:{sa}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                group="resource.k8s.io", resource=plural, subresource=sub or None, verb=verb, name=name
            ),
        )
    )
    answer = client.AuthorizationV1Api(cluster.api).create_subject_access_review(review)
    return bool(answer.status and answer.status.allowed)


def central_rights_missing(cluster: Cluster, profile: Profile) -> list[str]:
    """Per account a central part of the stack runs as: what it lacks of resourceclaims/driver arbitrary-node:<verb>
    for the verbs it holds on resourceclaims/status (IMP-9's words); nothing before 1.36, which does not check it."""
    if parse_version(cluster.info.version).minor < GRANULAR_STATUS_AUTHORIZATION:
        return []
    out = []
    for account, users in profile.account_users().items():
        if not users.central:
            continue
        verbs = [v for v in STATUS_VERBS if allowed(cluster, account, "resourceclaims/status", v)]
        driver = profile.driver
        rules = {v: allowed(cluster, account, "resourceclaims/driver", f"{CENTRAL_SCOPE}:{v}", driver) for v in verbs}
        if text := central_missing(account, users, verbs, rules, driver):
            out.append(text)
    return out
