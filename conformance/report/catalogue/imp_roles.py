"""IMP requirements on the implementation's roles: a restart of any of them loses nothing, each holds the least
privilege, and none touches other drivers' objects."""

from __future__ import annotations

from conformance.report.catalogue.model import _IMP, Applies, Doc, Requirement, _fabric, _r

REQUIREMENTS: tuple[Requirement, ...] = (
    _r(
        "IMP-8",
        "implementation",
        "MUST",
        "a restart of any role in any state of a claim and its device (the restart matrix) loses nothing",
        _IMP,
    ),
    _r("IMP-9", "implementation", "SHOULD", "least privilege, refused on other drivers' claims", _IMP),
    _r(
        "IMP-17",
        "implementation",
        "MUST",
        "other drivers' ResourceClaims, ResourceSlices and DeviceClasses are ignored, never written",
        f"{_IMP} / Roles",
    ),
)

APPLIES: dict[str, Applies] = {
    "IMP-8": _fabric("its steps are those of an attach and a detach, staged in the fabric"),
}

DOCS: dict[str, Doc] = {
    "IMP-8": Doc(
        "restart matrix: each restartable role (`roles`, or `controller.process`) is restarted with a device in every "
        "reachable combination of the claim's state (pending, allocated, conditions True, released) and the fabric's "
        "(free, attaching, attached, detaching), one cell each, staged side by side: pending/free, allocated/free "
        "(decided, not yet sent), allocated/attaching, allocated/attached (no condition written), ready/attached, "
        "released/attaching, released/attached (no detach sent yet), released/detaching; a device moving from node A "
        "to B (attached to A or detaching from A with B's claim waiting, attaching to B); a claim of "
        "`devicesPerClaim` devices with one attach in flight. Between every two steps of the detach path (decided: "
        "released/attached; guard made: every detach refused by the fault injector's `unreachable` until the role is "
        "back; detach sent: released/detaching; detach done: the held detach let complete while the role is down; "
        "offered again) and of the failure path (failure seen: the held attach let fail while the role is down; "
        "device out of offer: the failure report refused by an admission policy of the suite's until the role is "
        "back; failure reported), each step read from the probe, the slices, taint rules and the claim's conditions. "
        "A cell counts only when the record and the probe show "
        "its state at the kill. Each pod binds where its devices are attached, no condition True before its attach, "
        "a bound pod's device stays attached, and afterwards every device is detached and offered again within "
        "`detachSeconds` (once offered again, never attached again after the restart); a failure cell's failure is "
        "reported, the failed device out of offer from the report on and not attached again once the stack acted on "
        "it, and the pod binds on the claim's other device. The matrix, its paths' steps, the combinations no cell "
        "stages and why, and each cell's outcome are in "
        "conformance-report.yaml (`restartMatrix`) and the HTML report. Runs alone (it restarts the shared stack)",
        models={
            "keep-in-pool": "one allocation, bound with it, device attached; a move: B's claim allocated the device "
            "still on A",
            "reschedule-to-local": "fabric allocation cleared only by `reschedule`, bound with the node-local copy; a "
            "move: B's claim pending until the device is free",
            "counted": "the same; held operations selected by node (each cell its own node); the move and failure "
            "cells are not staged (entries name no device)",
        },
        skips="a restart command (not a process) cannot stage the cells changed while the role is down "
        "(allocated/free, released/attached, the move attached to A, allocated/attached: its attach must complete "
        "while the role is down; detach done, failure seen); a miss of the pending/free cell's timing around the "
        "command is skipped with why; the multi-device cell needs "
        "`multiDeviceClaims` and `fabricConcurrency` of 2 or more; the failure path needs `attachFailureReporting` "
        "and identified entries (on count-based pools the failed device's offer cannot be read per device): each "
        "such cell is skipped with why",
    ),
    "IMP-9": Doc(
        "least-privilege: for every ServiceAccount of the stack (`serviceAccounts`, `controller.serviceAccount`, "
        "those processes get with `{sa_kubeconfig:...}`), with its own token: for every verb it may use on "
        "`resourceclaims/status`, its own driver's conditions allowed and another driver's refused "
        "(`resourceclaims/driver`; at least one account must write status). Each part an account serves is judged "
        "as what it is: a central part (an unbound token) must write claims of every node and needs "
        "`arbitrary-node:<verb>` (a central writer lacking it fails, naming it); a per-node part (a `perNode` "
        "process, a `serviceAccounts` entry with `runs: per-node`) writes with a token bound to a pod on a node, on a "
        "claim allocated there, and needs `associated-node:*`, and for a fabric stack may not hold "
        "`arbitrary-node:*` (RDY-8 judges that for a node-local one). One account serving both (a controller and a "
        "DaemonSet under one ServiceAccount, or `runs: both`) is judged as both, and the failure says both cannot "
        "hold, naming both parts and the missing or excess right. Its rules and a catalogue of sensitive rights "
        "judged against the minimum of the "
        "KEP's roles (conformance/suite/implementation/rights.py `MINIMUM`) less the reads every ServiceAccount "
        "of the cluster holds; dry-run writes of another driver's ResourceSlice, which the cluster must refuse "
        "(RBAC cannot restrict slices by driver: the reference installs a ValidatingAdmissionPolicy). Every right "
        "beyond that fails, naming the account, the rule, where it holds and the Role granting it, unless "
        "declared in `rights` (another driver's slices only by a right with `otherDrivers: true`). Where the "
        "scheduler placed the pod a central process's token is bound to is printed with the result",
        skips="on 1.34 and 1.35 status is authorized per claim, not per driver: the refusal test is skipped there "
        "with that reason (the requirement is then partial)",
    ),
    "IMP-17": Doc(
        "coexistence, judged in its own phase (the coexistence phase: the suite's cluster scenarios keep claims of "
        "their own drivers live meanwhile): from the implementation's readiness, a suite-owned other driver keeps a "
        "DeviceClass, a ResourceSlice and claims with binding conditions that are pending, allocated and waiting "
        "(timing out and allocated again), and failed; while all these states have been seen, an attach-before-bind "
        "of the implementation's own device must bind; and none of the other driver's objects may be written by "
        "anyone but the suite and the control plane (the slice and class keep their resourceVersion, the claims' "
        "status.devices hold only what the suite wrote, no other field manager), checked again when the phase ends. "
        "Every other implementation requirement is judged afterwards, with no other driver's binding-condition claim "
        "live (the foreign-free phase), so a stack that breaks on other drivers fails IMP-17 with that cause and its "
        "other gaps are still reported; the implementation's log lines that name the suite's own pools say so",
        models={
            "keep-in-pool": "its own pod binds on the fabric allocation while the other claims live",
            "reschedule-to-local": "its own pod binds on the node-local copy while the other claims live",
            "counted": "its own pod binds on capacity of a node the scenario has to itself",
            "node-local": "its own pod, pinned to a node with its devices, binds there with a device of that node's "
            "own slices (no fabric to ask), reached without a failure or an in-place edit",
        },
    ),
}
