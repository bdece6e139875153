"""Lifecycle requirements (the KEP's Production Readiness answers, on real binaries): the gate switched off and on
again on a live cluster (GATE-*), upgrade -> downgrade -> upgrade on one etcd (UPG-*), kube-scheduler and
kube-controller-manager one minor older than kube-apiserver (SKEW-*). Judged by `dra-conformance lifecycle`, which
restarts the components of a cluster of its own (conformance/lifecycle/), never by a suite run."""

from __future__ import annotations

from conformance.report.catalogue.model import LIFECYCLE, Applies, Doc, Requirement, _r

_ENABLE = "PRR / Feature Enablement and Rollback"
_UPGRADE = "PRR / Rollout, Upgrade and Rollback Planning"
_SKEW = "PRR / Version Skew Strategy"

REQUIREMENTS: tuple[Requirement, ...] = (
    _r(
        "GATE-1",
        "lifecycle",
        "MUST",
        "running pods and their claims are not affected when the gate is switched off (either order) and on again",
        _ENABLE,
        LIFECYCLE,
    ),
    _r(
        "GATE-2",
        "lifecycle",
        "MUST",
        "nothing stored is lost: binding-condition fields written before the gate went off are kept, read and "
        "rewritten, while it is off and after",
        _ENABLE,
        LIFECYCLE,
    ),
    _r(
        "GATE-3",
        "lifecycle",
        "MUST",
        "re-enabled, the feature works again: new pods wait in PreBind and bind once their conditions are True, pods "
        "left pending meanwhile are served",
        _ENABLE,
        LIFECYCLE,
    ),
    _r(
        "UPG-1",
        "lifecycle",
        "MUST",
        "upgrade -> downgrade -> upgrade on one etcd: objects made by either release are served, removed and "
        "re-allocated by the other",
        _UPGRADE,
        LIFECYCLE,
    ),
    _r(
        "UPG-2",
        "lifecycle",
        "MUST",
        "a pod waiting in PreBind across a switch of release binds only once its conditions are True, on its "
        "allocated node",
        _UPGRADE,
        LIFECYCLE,
    ),
    _r(
        "UPG-3",
        "lifecycle",
        "MUST",
        "across every switch: no device held by two claims, no bound pod's allocation lost, no condition left on a "
        "device its claim no longer holds",
        _UPGRADE,
        LIFECYCLE,
    ),
    _r(
        "SKEW-1",
        "lifecycle",
        "MUST",
        "kube-scheduler and kube-controller-manager one minor older than kube-apiserver: pods wait in PreBind, bind "
        "once their conditions are True, and a failure condition sends the pod to another device",
        _SKEW,
        LIFECYCLE,
    ),
)

APPLIES: dict[str, Applies] = {}  # the cluster's: no implementation takes part

_SWITCHABLE = (
    "a release whose gate cannot be switched off (1.38: DRADeviceBindingConditions GA, locked on) is not run: "
    "`dra-conformance lifecycle gates` refuses it and the review names it as not run"
)
_PAIR = (
    "needs the cached binaries of both releases (`dra-conformance build --k8s-version V`); a pair without them is "
    "named as not run"
)

DOCS: dict[str, Doc] = {
    "GATE-1": Doc(
        "`dra-conformance lifecycle gates`: on a cluster of its own, with a pod bound on a fabric device "
        "(`bindsToNode`, binding and failure conditions; its conditions written True) and a pod waiting in PreBind, "
        "kube-scheduler and kube-apiserver are restarted with DRADeviceBindingConditions off (the PRR's rollback "
        "order: scheduler first; then a second round in the other order) and on again. After every restart the bound "
        "pod must be the same pod (uid), on the same node, Running, and its claim unchanged: the same devices, "
        "`bindingConditions` / `bindingFailureConditions`, the allocation's one-node selector, `allocationTimestamp`, "
        "`reservedFor` and the True conditions in `status.devices`",
        skips=_SWITCHABLE,
    ),
    "GATE-2": Doc(
        "the same run: after every restart the fabric slice and the claims written while the gate was on still carry "
        "their binding-condition fields as served, and keep them when written again with the gate off (a label on "
        "the slice, a condition message in the claim's status); read once more after re-enabling. What a NEW slice "
        "written while kube-apiserver's gate is off keeps is recorded (dropped, as the KEP says), not judged here",
        skips=_SWITCHABLE,
    ),
    "GATE-3": Doc(
        "the same run, once both components run with the gate on again: a new pod on the fabric device class is "
        "allocated, stays unbound for two PreBind polls (waiting in PreBind) and binds to its allocated node once "
        "the suite writes its conditions True; every pod left pending while the gate was off (unschedulable, or "
        "waiting) is allocated and bound once its conditions are True. What each pod did while the gate was off "
        "(not selectable, or bound without its conditions) is recorded beside the KEP's text",
        skips=_SWITCHABLE,
    ),
    "UPG-1": Doc(
        "`dra-conformance lifecycle upgrade --from OLD --k8s-version NEW` (adjacent minors): one cluster starts on "
        "OLD; kube-apiserver, then kube-controller-manager and kube-scheduler are restarted on NEW, then back on "
        "OLD in the reverse order, then on NEW again, all on the same etcd. After every switch: every object made "
        "before (fabric slice, claims, pods) is served with its binding-condition fields; a pod and its claim made "
        "by the other release are deleted and the claim is removed; the device it freed is allocated again (to a "
        "new pod, which waits and binds once its conditions are True)",
        skips=_PAIR,
    ),
    "UPG-2": Doc(
        "the same run: a pod left waiting in PreBind (conditions never written) across every switch must still be "
        "unbound after it, and bind to its allocated node once the suite writes its conditions True at the end",
        skips=_PAIR,
    ),
    "UPG-3": Doc(
        "the same run: after every switch, over every claim of the run: no device in two claims' allocations, "
        "every bound pod's claim allocated and reserved for it, and `status.devices` entries only for devices the "
        "claim's allocation holds",
        skips=_PAIR,
    ),
    "SKEW-1": Doc(
        "the upgrade run's first step is the skew: kube-apiserver on NEW, kube-scheduler and "
        "kube-controller-manager still on OLD. Then a new pod on the fabric class must wait in PreBind (allocated, "
        "unbound for two polls) and bind once its conditions are True; another, given a failure condition, must be "
        "deallocated and allocated a different device (the failed one withdrawn from the slice), then bind once "
        "that one's conditions are True. What a scheduler with the gate off does (the KEP's other skew case) is "
        "measured by the gates run and printed beside the KEP's sentence",
        skips=_PAIR,
    ),
}
