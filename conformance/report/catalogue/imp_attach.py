"""IMP requirements of a fabric device's attach and detach lifecycle: published fabric entries, attach before bind,
conditions only while attached, attach failures, detach on release, the run-wide attachment rules, faults (a delete in
PreBind, a late attach, an unreachable fabric, a deleted node), several devices, a device moved, a shared claim, and a
device used again (IMP-28, every binding model)."""

from __future__ import annotations

from conformance.report.catalogue.model import _FIXED_TIMEOUT, _IMP, Applies, Doc, Requirement, _fabric, _r

REQUIREMENTS: tuple[Requirement, ...] = (
    _r("IMP-1", "implementation", "MUST", "fabric devices published with bindsToNode and conditions", _IMP),
    _r("IMP-2", "implementation", "MUST", "attach before bind: attached to that node when the pod binds", _IMP),
    _r("IMP-3", "implementation", "MUST", "conditions set True only after the attach completed", _IMP),
    _r("IMP-4", "implementation", "MUST", "attach failure reported; failed device not offered again", _IMP),
    _r("IMP-5", "implementation", "MUST", "detach on release within the promised time", _IMP),
    _r(
        "IMP-10",
        "implementation",
        "MUST",
        "a device stays attached to its pod's node from binding until the pod is gone",
        _IMP,
    ),
    _r("IMP-11", "implementation", "MUST", "binding conditions True only while the fabric says attached there", _IMP),
    _r("IMP-12", "implementation", "MUST", "no attachment outlives its claim; released devices offered again", _IMP),
    _r(
        "IMP-13",
        "implementation",
        "MUST",
        "a pod deleted in PreBind leaves nothing attached; device offered again",
        _IMP,
    ),
    _r(
        "IMP-14",
        "implementation",
        "MUST",
        "an attach completing after the binding timeout: no orphan, the pod binds",
        _IMP,
    ),
    _r(
        "IMP-15",
        "implementation",
        "MUST",
        "fabric manager out of reach: no condition claims an attach; converges",
        _IMP,
    ),
    _r(
        "IMP-16",
        "implementation",
        "SHOULD",
        "a node deleted while a device is attached to it: detached and offered again",
        _IMP,
    ),
    _r(
        "IMP-18",
        "implementation",
        "MUST",
        "claims of several devices and requests: each device attached, reported and let go on its own",
        _IMP,
    ),
    _r(
        "IMP-19",
        "implementation",
        "MUST",
        "a device moved between nodes: detached from the first before attached to the second, no early condition",
        _IMP,
    ),
    _r(
        "IMP-20",
        "implementation",
        "MUST",
        "a shared claim: one attach, every pod binds there, attached until the last pod is gone, then let go",
        _IMP,
    ),
    _r(
        "IMP-28",
        "implementation",
        "MUST",
        "a device used again is served afresh: no failure, attachment or readiness left over from its last use",
        _IMP,
    ),
)

APPLIES: dict[str, Applies] = {
    "IMP-1": _fabric("it judges the published fabric entries: bindsToNode, the nodes a fabric pool reaches"),
    "IMP-2": _fabric("it judges what the fabric says is attached where the pod binds"),
    "IMP-3": _fabric("it judges binding conditions against the fabric's attach"),
    "IMP-4": _fabric("it judges an attach failure and the failed fabric device's quarantine"),
    "IMP-5": _fabric("it judges the detach of a released device"),
    "IMP-10": _fabric("it judges the fabric's attachment while the pod runs"),
    "IMP-11": _fabric("it judges binding conditions against the fabric's attachments"),
    "IMP-12": _fabric("it judges attachments that outlive their claims"),
    "IMP-13": _fabric("it judges an attach slowed or hung in the fabric and the detach after a delete in PreBind"),
    "IMP-14": _fabric("it judges a fabric attach completing after the binding timeout"),
    "IMP-15": _fabric("it judges a fabric manager out of reach"),
    "IMP-16": _fabric("it judges the detach of a device attached to a deleted node"),
    "IMP-18": _fabric("it judges each device's attach and detach"),
    "IMP-19": _fabric("it judges a device moved through the fabric from one node to another"),
    "IMP-20": _fabric("it judges a shared claim's one attach and the detach after its last pod"),
}

_SAME = "the same"
_LOCAL = "bound with the node-local copy of the attached device afterwards"
_COUNTED_LET_GO = (
    "let go = nothing of the device attached to the scenario's node, no copy of it offered there, and the pool offers "
    "as many entries as the probe counts free (less the free devices whose last attach failed)"
)
# The lifecycle scenarios run for two claim shapes (suite/implementation/shape.py): what the `-multi` ones read.
_MULTI = (
    " Also run as `<scenario>-multi` (the capability `multiDeviceClaims`): one claim of `devicesPerClaim` "
    "devices over two requests, every device of it judged on its own, the failure naming each device"
)
DOCS: dict[str, Doc] = {
    "IMP-1": Doc(
        "attach-before-bind: one pod pinned to a node without node-local devices, watched from creation to binding; "
        "the published fabric entries and the pod's path are checked against the profile's `bindingModel`, "
        "`fabricEntries` and `failureConditions`",
        models={
            "keep-in-pool": "fabric entries carry `bindsToNode`, binding conditions, their reach and the identity; "
            "the pod binds with its fabric allocation",
            "reschedule-to-local": "the same; the fabric devices publish the condition declared `reschedule`; the pod "
            "binds with the node-local copy",
            "counted": "entries carry `modelAttribute` and no identity; the rest as reschedule-to-local",
        },
        skips="no node without node-local devices of the driver is reached by a fabric pool",
    ),
    "IMP-2": Doc(
        "attach-before-bind: at the pod's binding the fabric probe's first answer sent after it shows the device "
        "attached to the pod's node",
        models={
            "keep-in-pool": "the allocated fabric device is attached to the pod's node",
            "reschedule-to-local": "the final allocation is the node-local copy on that node, of the same physical "
            "device as the fabric allocation before it, attached there",
            "counted": "the node-local copy's device is attached there (the entry had no identity to compare)",
        },
        skips="the test needs the profile's fabricProbe (skipped without one)",
    ),
    "IMP-3": Doc(
        "attach-before-bind: a binding condition is True only once the probe says that device is attached to the "
        'allocation\'s node (a probe answer saying "not attached yet" after the condition is proof). Order, judged '
        "over the whole run (test_order.py, conformance/observe/order.py): for every claim of every scenario, the "
        "write that first shows the device's binding conditions (or one meaning `reschedule`) True is compared with "
        "the probe's first answer sent after it: attached to THAT node, or the failure names the write's revision and "
        "time and when the probe first said attached there (a condition set True and the attach done before the "
        "scheduler's next 5 s PreBind poll fails too). Broken on purpose (tests/selftest/test_order_breakage.py): "
        "attached reported while the attach is in flight (`--broken-report-while-attaching`)",
        models={
            "keep-in-pool": "every binding condition of the fabric allocation",
            "reschedule-to-local": 'the same for the condition meaning `reschedule` ("attached, reallocate")',
            "counted": "the same, the device being the node-local copy's the claim moved to",
        },
        skips="the test needs the profile's fabricProbe (skipped without one)",
    ),
    "IMP-4": Doc(
        "attach-failure: the fault injector fails the attach: a failure condition (meaning `failure`) with reason "
        "and message, deallocation, reallocation to another device. The quarantine is judged over the run's record "
        "(conformance/observe/quarantine.py), from the claim write that showed the failure condition True until the "
        "scenario clears its fault: slices, claims and DeviceTaintRules replayed in etcd revision order (which watch "
        "stream delivered first does not matter), and at no revision may an entry of the failed device sit in a "
        "slice reaching the failed node, unallocated and untainted (NoSchedule/NoExecute), for the watch streams' "
        "skew (1 s) or more; no claim on that node may be allocated it; no probe answer sent a probe period after the "
        "failure may show it attaching, attached or detaching there. On the failed node only, because the KEP lets a "
        "stack narrow the device's node selector instead of removing or tainting it. Order, judged over the whole "
        "run (test_order.py, conformance/observe/order.py): the failed device is out of offer no later than the "
        "failure condition that reports it: at that write's revision no entry of it sits free in a slice reaching "
        "the node, the failing claim's own entry counted free (hidden before the scheduler deallocates is not "
        "enough); the failure names both revisions. Broken on purpose, it fails "
        "(tests/selftest/test_suite_detects_breakage.py, test_order_breakage.py): a quarantine 10 s late "
        "(`--broken-late-quarantine`), a failed counted device given to the next entry "
        "(`--broken-reassign-failed-device`), the failure reported 1 s before the device is hidden "
        "(`--broken-report-before-hiding`). A profile declaring `promises.reportsFailures: false` (the stack never "
        "sets its failure conditions) fails it citing the declaration, without a fault injector: the KEP has the "
        "controller set a failure condition True when the attach fails and keep the failed device from being picked "
        "again, with no opt-out; without it the pod waits out the bindingTimeout and the failed device may be "
        "allocated again",
        models={
            "keep-in-pool": "the failed device is the leased one",
            "reschedule-to-local": _SAME,
            "counted": "the fault selects attaches to the scenario's node (kept to it alone); the failed device is the "
            "one the fault's record names; entries have no identity, so 'never again' is judged from the probe (the "
            "device attaching there) and from the device a claim's status names. Not judged: the pool's entry count "
            "against the fabric's free count during the quarantine (stream skew between pool rewrites and the probe "
            "needs IMP-5's allowance), nor the order clause (a count entry names no device: listed as not judged)",
        },
        skips="no node without node-local devices is reached by two fabric devices",
    ),
    "IMP-5": Doc(
        "detach-on-release: pod and claim deleted: within `promises.detachSeconds` the probe shows the device detached "
        "and it is offered free again, for at least 1 s (a transient offer does not count)." + _MULTI + ": each "
        "device of the claim detached within the promise (its own time), and all offered again",
        models={
            "keep-in-pool": "detached, then exactly one free entry of it for 1 s; multi: the claim's leased fabric "
            "devices, each with exactly one free entry",
            "reschedule-to-local": "the same (the fabric pool lists it again); multi: the devices are the node-local "
            "copies' physical devices the pod ended with",
            "counted": "detached, no copy of it offered, and the pool offers at least as many entries as the probe "
            "counts free, less the free devices whose last attach failed, for 1 s; multi: the devices the node-local "
            "copies name, on the scenario's own node",
        },
    ),
    "IMP-10": Doc(
        "device-lifecycle and every other scenario's devices, judged over the whole run-wide record once every "
        "implementation scenario has ended: every device stays attached to its pod's node from binding until the pod "
        "is gone. Order (test_order.py): where the probe's answers go from attached to anything else, no pod bound "
        "there with the device may still be there 1 s later (the streams' skew: its use ends with its deletion, "
        "its node's, or its claim's release after its deletion began, by revision); small-pool-churn deletes some "
        "claims 2 s before their pods. The "
        "failure names the pod, its binding revision and its deletion's. Broken on purpose "
        "(tests/selftest/test_order_breakage.py): a claim being deleted treated as released "
        "(`--broken-detach-on-claim-delete`)",
        skips="no implementation scenario ran, or nothing could be identified and judged (said so)",
    ),
    "IMP-11": Doc(
        "judged over the whole record: binding conditions (and a condition meaning `reschedule`, unless another claim "
        "holds the device) are True only while the probe says attached to the allocation's node",
        skips="no implementation scenario ran, or nothing could be identified and judged (said so)",
    ),
    "IMP-12": Doc(
        "judged over the whole record: every attachment is held by a live allocation or gone (and, for identified "
        "fabric entries, offered again) within `detachSeconds` of its last release, the time the suite itself held "
        "the device's detach or the stack back (IMP-8's held detaches, its restarts) counted out; none left at the end",
        skips="no implementation scenario ran, or nothing could be identified and judged (said so)",
    ),
    "IMP-13": Doc(
        "prebind-delete-slow, prebind-delete-hang: the claim waits in PreBind with its attach slowed or hung, then pod "
        "and claim are deleted: no binding condition True before the fabric said attached; the device detached and "
        "offered again within `detachSeconds` of the attach's end." + _MULTI + ": ONE device's attach slowed or hung "
        "while the others complete; every device the fabric listed on the node for the claim is let go, and each "
        "device's conditions are compared with THAT device's attach",
        models={
            "keep-in-pool": "the leased device, slowed or hung; detached, then exactly one free entry for 1 s; multi: "
            "the claim's leased devices the probe listed on the node",
            "reschedule-to-local": _SAME,
            "counted": "the fault selects the attach to the scenario's own node; the device is the one it hit; "
            + _COUNTED_LET_GO
            + "; multi: every device the probe listed on that node (the scenario's alone) since the pod, the entries' "
            "conditions compared with the device `status.devices[].data` names, else with the first attach",
        },
    ),
    "IMP-14": Doc(
        "late-attach-after-timeout: the attach hangs until the scheduler's `bindingTimeout` clears the allocation, "
        "then completes: the pod still ends bound where the fabric attached its device, and a late-attached device the "
        "pod did not end with is let go within `detachSeconds`." + _MULTI + ": one device hangs, the others attach; "
        "the pod binds with every device attached, and every device attached for the claim it did not end with is "
        "let go",
        models={
            "keep-in-pool": "the hung device is re-allocated to the same pod (one leased device) or let go",
            "reschedule-to-local": "the same, bound with the node-local copies",
            "counted": "the fault selects by node; any device the probe listed on the scenario's node that the pod "
            "did not end with must be let go",
        },
        skips=_FIXED_TIMEOUT,
    ),
    "IMP-15": Doc(
        "fabric-unreachable: the fault injector's `unreachable` mode refuses the pod's attach and detach for 6 s after "
        "the stack first meets it: nothing attached meanwhile, no binding condition True before the fabric said "
        "attached; afterwards the pod binds where its device is attached and, once deleted, the device is let go."
        + _MULTI
        + ": the outage refuses every device of the claim (count-based: every operation on the scenario's node)",
        models={
            "keep-in-pool": "bound with the fabric allocation afterwards",
            "reschedule-to-local": _LOCAL,
            "counted": "the refusal selects the scenario's node; " + _LOCAL,
        },
    ),
    "IMP-16": Doc(
        "node-deleted: a Node of its own (a machine the fabric reaches that is no node yet: the probe's "
        "`free[].nodes`), the pod binds there, then the Node is deleted and its pod removed as pod GC would: from the "
        "control plane's release of the claim the device must be detached and offered again for 1 s within "
        "`detachSeconds`, and no slice of the driver may still name the node. With the capability `multiDeviceClaims` "
        "a second pod on the same node holds a claim of `devicesPerClaim` devices over two requests: every device of "
        "both claims must be let go, each named in the failure",
        models={
            "keep-in-pool": "the leased device, attached to the added node; then detached, exactly one free entry",
            "reschedule-to-local": "the same, the device being the node-local copy's (its slice goes with the node)",
            "counted": "capacity leased on the added node; " + _COUNTED_LET_GO,
        },
        skips="outside the local provider without the capability `nodeLifecycle`; when the probe names no spare "
        "machine of a fabric (`free[].nodes`); when the control plane does not release the claim within its bound "
        "(not judgeable)",
    ),
    "IMP-18": Doc(
        "multi-device: one pod's claim of `devicesPerClaim` devices (default 4) over two requests, one attach slowed "
        "4 s: every device attached to the pod's node at the binding, each device's conditions (`status.devices`, "
        "per driver, pool, device) True only once THAT device is attached there, each request answered with its "
        "count, all let go after the release. multi-device-failure: N of N+1 leased devices, every attach held by a "
        "`hang` fault, then one fails and the others complete: the failed device's entry carries the failure "
        "condition (reason, message), the claim is rescheduled, the pod binds with N devices all attached, the failed "
        "one never allocated again, and devices of the failed allocation the pod did not end with are let go within "
        "`detachSeconds` of the deallocation",
        models={
            "keep-in-pool": "each leased fabric device of the claim; the healthy devices of the failed allocation "
            "usually go on into the new one (exactly N healthy devices are leased)",
            "reschedule-to-local": "per device: the node-local copy (a copy of a device the fabric allocation held) "
            "or, where the stack kept it, the fabric device, each attached there; a condition meaning `reschedule` "
            "only after that device's own attach",
            "counted": "capacity on the scenario's own node; the devices are those the faults hit and the node-local "
            "copies (or `status.devices[].data`, per allocation) name; " + _COUNTED_LET_GO,
        },
        skips="when no node without node-local devices is reached by two fabric devices (three for the failure)",
    ),
    "IMP-19": Doc(
        "device-mobility: a device used by a pod on node A is released and asked for by a pod pinned to node B of "
        "its fabric: the probe must show it leave A (free, or detaching from A) before any answer lists it on B; no "
        "condition of B's allocation True before the probe says it is attached to B; the pod binds on B with it "
        "there; afterwards it is let go",
        models={
            "keep-in-pool": "the leased device is offered while it idles on A, so B's claim gets it while it is still "
            "attached to A: the stack must move it (detach, then attach) before reporting",
            "reschedule-to-local": "B waits until the device is free again (listed only when free), then the same",
            "counted": "forced by the fabric's truth: a model whose fabric has at most 17 free devices, all its "
            "capacity and nodes A and B the scenario's alone; a suite pod on A holds every free device of the model "
            "but one, a pod on A gets the last (X, named by its node-local copy), is deleted, and B's pod asks: X is "
            "the only device the fabric can give B; B must end with X, X must leave A before it is listed on B",
        },
        skips="when no fabric device reaches two nodes; count-based: when no model has 2..17 free devices on a "
        "fabric reaching two nodes without node-local devices, or the probe shows another free device of the model "
        "when B asks (the move cannot be forced: said so)",
    ),
    "IMP-20": Doc(
        "shared-claim-attach: one ResourceClaim used by 3 pods pinned to one node: the device is attached once, every "
        "pod binds there with it attached; after the first pod leaves the claim's `reservedFor`, every probe answer "
        "for 3 s says it is still attached there; after the last pod and the claim it is let go",
        models={
            "keep-in-pool": "one fabric allocation for all pods, one attach",
            "reschedule-to-local": "the claim moves to the node-local copy once (every pod waits: a shared claim is "
            "deallocated only when no pod holds it)",
            "counted": "the node is the scenario's own: exactly one device arrives there; " + _COUNTED_LET_GO,
        },
        skips="when no node without node-local devices is reached by a fabric pool",
    ),
    "IMP-28": Doc(
        "small-pool-churn (test_reuse.py): three devices, leased on purpose (observe/devices.py `prefer`: the device "
        "whose attach failed last, the one that moved last, the one released last, where free), serve ten claims in "
        "turn, two at a time; the first claim's attach fails (a `fail` fault, disarmed once the failure shows), the "
        "last two claims go to a second node the devices reach, every third claim is deleted 2 s before its pod. "
        "Every holding of a device that follows another claim's holding of it is a reuse, named by its path (after a "
        "failure, after a move, readied once, released: conformance/observe/reuse.py) and judged: no failure "
        "condition True while the suite armed no fault (a stale failure), no binding condition True before the "
        "device is attached (readied) on THAT node (stale attachment or readiness: the fabric probe, or the "
        "readiness probe), every claim served (a failure not cleared). The failure's first line names the device, "
        "the path, the claim, the revisions and the earlier use. Broken on purpose "
        "(tests/selftest/test_order_breakage.py): a node-local daemon that reports a device ready again without "
        "readying it (`--broken-stale-ready`), or its old failure to every later claim "
        "(`--broken-stale-failure`)",
        models={
            "keep-in-pool": "the leased devices; a device idle on the first node is offered, so a move is the stack's",
            "reschedule-to-local": "the same; a device is listed again only once detached, so the moves wait for it",
            "counted": "capacity on a node of the scenario's own: the devices are those the claims' status names; no "
            "second node",
            "node-local": "three gated devices on one node: released = readied once; the readiness probe judges",
        },
        skips="no faultInjector or no `attachFailureReporting`: no failure caused (said in the test's properties); no "
        "probe: only stale failures and unserved claims are judged",
    ),
}
