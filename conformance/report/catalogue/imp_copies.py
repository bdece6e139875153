"""IMP requirements against duplicates and copies: no physical device offered or held twice, a claim moved to its
device's node-local copy only by deallocation and reallocation, a hot-plugged copy never another claim's."""

from __future__ import annotations

from conformance.report.catalogue.model import _IMP, Applies, Doc, Requirement, _fabric, _r

REQUIREMENTS: tuple[Requirement, ...] = (
    _r("IMP-6", "implementation", "MUST", "no physical device offered or held twice", _IMP),
    _r("IMP-7", "implementation", "SHOULD", "AllocationResult rewriting only by deallocation + reallocation", _IMP),
    _r(
        "IMP-27",
        "implementation",
        "MUST",
        "a hot-plugged device's copy is never held by, nor offered to, another claim while one holds the device",
        _IMP,
    ),
)

APPLIES: dict[str, Applies] = {
    "IMP-6": _fabric(
        "it judges one physical device offered both as a fabric entry and as its node-local copy; a node-local device "
        "has one entry, and no device held by two claims is the scheduler's SCH-9"
    ),
    "IMP-7": _fabric("it judges the move of a claim from its fabric device to the hot-plugged node-local copy"),
    "IMP-27": _fabric("it judges the fabric entry and the hot-plugged node-local copy of one device"),
}

DOCS: dict[str, Doc] = {
    "IMP-6": Doc(
        "duplicate-burst: 5 pods at once race for 2 devices: 2 bind, 3 wait, each pod binds once as others go; the "
        "run-wide invariant watcher sees no physical device held by two allocations or offered free twice",
        models={
            "keep-in-pool": "2 devices, 5 pods: 2 at a time; never held or offered twice",
            "reschedule-to-local": "the same (waiting reasons may be `SchedulerError` after a reschedule)",
            "counted": "entries are interchangeable: the 5 pods get capacity at once, each a distinct physical device; "
            "offered entries never exceed the probe's free count",
        },
        skips="no node is reached by enough fabric devices of the driver",
    ),
    "IMP-7": Doc(
        "reschedule-to-local: a pinned pod's claim moves to the hot-plugged node-local copy only through deallocation "
        "and reallocation after a condition meaning `reschedule`; same node, same physical device. Order, judged over "
        "the whole run (test_order.py, conformance/observe/order.py): a condition meaning `reschedule` on a fabric "
        "entry is written only once the node-local copy it points to is published (at that write's revision a slice "
        "of the allocation's node lists the device; not judged while another claim holds it: then it means \"in "
        'use"); the failure names both revisions. Broken on purpose (tests/selftest/test_order_breakage.py): the '
        "reschedule asked for once attached, before the copy (`--broken-early-reschedule`, a 3 s hot-plug delay)",
        models={
            "keep-in-pool": "skipped: the profile does not claim `rescheduleToLocal`",
            "reschedule-to-local": "fabric allocation, cleared after `reschedule` True, node-local copy of the same "
            "device, same node",
            "counted": 'the same, "same device" judged by the probe',
        },
    ),
    "IMP-27": Doc(
        "copy-race: a pod's claim is allocated a fabric device on a node without node-local devices; then 2 pods pinned"
        " to that node and asking for the same device wait in the scheduler's queue (node-local pools are tried first, "
        "and every slice or taint rule change sends them back), and each pod that binds is deleted until all have bound"
        " once. The run's record is judged (conformance/observe/copies.py): each claim's holding of an entry is an "
        "interval of etcd revisions (as SCH-9), mapped to the physical device; no two claims may hold one device "
        "through two copies over overlapping revisions (no threshold), and no copy of a held device may sit free "
        "(newest generation, unallocated, untainted) at any revision for the watch streams' skew (1 s) or more. A "
        "holding ends"
        " at the clearing, or at the first write showing one of its failure conditions True (the stack lets the device "
        "go; kube-scheduler tries the rescheduled pod again within milliseconds of its own deallocation, so a copy "
        "hidden until then would cost a second attach on every move). The failure names both holders with their "
        "revision intervals and the physical device. Broken on purpose (tests/selftest/test_copy_race_breakage.py): no "
        "hold on the copy and the reschedule asked 2 s after it appears (`--broken-no-hold`, identified and counted), a"
        " keep-in-pool node driver without its deny list",
        models={
            "keep-in-pool": "the hot-plugged copy stays hidden while the fabric allocation holds the device (the "
            "moving pod binds first, then the waiting pods take the fabric entry in turn)",
            "reschedule-to-local": "the node-local copy is no other claim's until the moving claim lets its fabric "
            "allocation go (the condition meaning `reschedule` True); then any waiting pod may win it (the moving pod "
            "then waits its turn)",
            "counted": "the waiting pods ask for a node-local copy of the model (so they wait rather than take "
            "capacity); the count entry's device is the one its status names, else the probe's one attach to the "
            "node while it was held",
        },
        skips="no node without node-local devices is reached by a fabric pool",
    ),
}
