"""BASE requirements: the baseline every other scenario builds on (a node-local device without conditions is
allocated, bound and Running; the cluster runs the gates and binding timeout it declares)."""

from __future__ import annotations

from conformance.report.catalogue.model import _NO_NODE, _SCH, Applies, Doc, Requirement, _r

REQUIREMENTS: tuple[Requirement, ...] = (
    _r("BASE-1", "baseline", "MUST", "a node-local device without conditions is allocated, bound, Running", _SCH),
    _r(
        "BASE-2",
        "baseline",
        "MUST",
        "the cluster runs the feature gates and binding timeout it declares",
        "Feature gates and releases; Design Details / Scheduler",
    ),
)

APPLIES: dict[str, Applies] = {}  # every binding model

DOCS: dict[str, Doc] = {
    "BASE-1": Doc(
        "a pod with a claim for a suite-owned node-local device that has no binding conditions: allocated, bound "
        "and Running, as before the KEP (the baseline every other scenario builds on)",
        skips=_NO_NODE,
    ),
    "BASE-2": Doc(
        "running-settings and binding-timeout: the gates the cluster declares (those every scenario relies on, and "
        "those the suite passed) must be the ones kube-apiserver (its `/metrics` through the API) and kube-scheduler "
        "(its secure port: the local provider, or `--scheduler-url` on an existing cluster) report in "
        "`kubernetes_feature_enabled`; a scheduler that cannot be reached is judged by what it did (its "
        "`BindingConditionsPending` event, emitted only with both binding-condition gates on). The timeout it runs, "
        "its `binding timeout` event's `eventTime` less `allocationTimestamp` (both the scheduler's clock), must be "
        "the declared `bindingTimeout` within [T, T + 3 s] (the timestamp's truncation to the second, one claim "
        "write); without that event the clearing's window of SCH-6 is used (conformance/cluster/settings.py)",
        skips="the timeout half on a release whose timeout is fixed (1.34: 600 s); a gate neither read nor shown by "
        "behaviour (e.g. the taint gates of a kind scheduler on 1.35/1.36), with the reason",
    ),
}
