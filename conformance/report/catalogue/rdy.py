"""RDY requirements: what a node-local readiness gate (bindingModel node-local: devices readied on their node, no
fabric) owes before and instead of an attach."""

from __future__ import annotations

from conformance.report.catalogue.model import Applies, Doc, Requirement, _gate, _r

# The KEP's readiness gate for devices that need preparation before binding (no fabric: node-local devices).
_RDY = "Summary / Motivation (device preparation before binding); Design Details / Scheduler"

REQUIREMENTS: tuple[Requirement, ...] = (
    _r("RDY-1", "readiness", "MUST", "node-local devices carry binding conditions; the allocation copies them", _RDY),
    _r(
        "RDY-2",
        "readiness",
        "MUST",
        "conditions written per allocated device, of the implementation's own driver",
        _RDY,
    ),
    _r("RDY-3", "readiness", "MUST", "a binding condition is True only once its device is ready on its node", _RDY),
    _r("RDY-4", "readiness", "MUST", "the pod binds only once every device of its claim is ready, on that node", _RDY),
    _r(
        "RDY-5",
        "readiness",
        "MUST",
        "a readying failure: failure condition True with reason and message, reallocation, device not picked again",
        _RDY,
    ),
    _r(
        "RDY-6",
        "readiness",
        "MUST",
        "a restart of the condition writer before, during or after a readying loses nothing",
        _RDY,
    ),
    _r("RDY-7", "readiness", "MUST", "a burst of pods: every one binds on ready devices, no device held twice", _RDY),
    _r(
        "RDY-8",
        "readiness",
        "SHOULD",
        "least privilege per node: a node's writer writes only its node's claims and slices",
        _RDY,
    ),
)

APPLIES: dict[str, Applies] = {
    # The node-local readiness gate's own requirements: a fabric device's gate is its attach, which IMP-* judge.
    "RDY-1": _gate("IMP-1"),
    "RDY-2": _gate("IMP-3, IMP-18"),
    "RDY-3": _gate("IMP-3, IMP-11"),
    "RDY-4": _gate("IMP-2"),
    "RDY-5": _gate("IMP-4"),
    "RDY-6": _gate("IMP-8"),
    "RDY-7": _gate("IMP-6"),
    "RDY-8": _gate("IMP-9"),
}

DOCS: dict[str, Doc] = {
    "RDY-1": Doc(
        "readiness-gate (bindingModel node-local): the driver's devices with `bindingConditions` are node-local "
        "(no `allNodes` slice, no `bindsToNode`), each with `bindingFailureConditions` and the identity attribute "
        "(the readiness probe names devices by it); the claim's first allocation carries the same two lists as "
        "the slice entries of its devices",
        skips="bindingModel other than node-local (the fabric models' devices are judged by IMP-1)",
    ),
    "RDY-2": Doc(
        "readiness-gate: one claim of two devices on one node, one of them readied slower (a `slow` fault, where the "
        "profile has a `faultInjector`): the pod binds with both devices of the profile's driver allocated, and each "
        "device's binding conditions are reported True in its own `status.devices` entry (per device, not one for "
        "the claim)",
        skips="bindingModel other than node-local",
    ),
    "RDY-3": Doc(
        "readiness-gate: each binding condition seen True (watch delivery time) is judged against the first readiness "
        "probe answer taken after it: the device is ready on the allocation's node, and ready since no later than "
        "0.5 s after the condition (the two clocks); judged per device, the slowed one too. Also judged in "
        "readiness-failure, readiness-restart, readiness-burst and small-pool-churn (every claim of the churn: a "
        "device readied once and used again must be ready for THIS claim, IMP-28)",
        skips="bindingModel other than node-local; no `readinessProbe` (whether a device is ready is what it says)",
    ),
    "RDY-4": Doc(
        "readiness-gate: the pod binds on the node its allocation pins, and the first probe answer after the binding "
        "says every device of the claim is ready there, since no later than 0.5 s after the binding",
        skips="bindingModel other than node-local; no `readinessProbe`",
    ),
    "RDY-5": Doc(
        "readiness-failure: two devices on one node leased to one claim of one device, a `fail` fault armed on "
        "each (for 5 readyings: a stack may retry before it reports); once the failure condition shows on the "
        "device the claim got, the other fault is disarmed. The failure condition (one of the result's "
        "`bindingFailureConditions`) is True with a reason and a message, the claim is allocated again, never "
        "again with the failed device, and the pod binds on a device that is ready. Order, judged over the whole run "
        "(test_order.py): the device is out of its slice (or tainted) no later than the failure condition's write. "
        "A profile declaring `promises.reportsFailures: false` fails it citing the declaration, without a fault "
        "injector: the KEP has the writer set a failure condition True on a failed readying and keep the device from "
        "being picked again, with no opt-out",
        skips="bindingModel other than node-local; no `faultInjector` (operation attach = the readying), unless "
        "`promises.reportsFailures: false` is declared",
    ),
    "RDY-6": Doc(
        "readiness-restart (runs alone): for every restartable role, three claims of one device each are staged and "
        "the role is killed and started once for all: a pod created while it is down (before-readying), a readying "
        "hung across the restart and let go after it (readying-in-flight), a readying let go while it is down so the "
        "probe says ready with nobody to report it (ready-unreported). Every pod binds, no failure condition, "
        "conditions True only once ready",
        skips="bindingModel other than node-local; no restartable role. Without a `faultInjector` only "
        "before-readying runs (the other two hold a readying), and the test says which steps did not run. A role "
        "restarted by a command cannot be held down: only readying-in-flight runs for it, and the test says so",
    ),
    "RDY-7": Doc(
        "readiness-burst: 8 pods at once (or as many as devices are published), each with its own claim from one "
        "class of exactly the 8 leased devices: every pod binds, no device is held by two claims at overlapping "
        "revisions, and each binding and condition is judged against the probe as in RDY-3 and RDY-4",
        skips="bindingModel other than node-local; fewer than 2 gated devices",
    ),
    "RDY-8": Doc(
        "node-privilege: every account a `perNode` process runs as, with a token bound to a pod on node A: no "
        "`resourceclaims/driver` `arbitrary-node:update|patch` for the driver; each status verb it holds is refused "
        "on a claim allocated on node B and allowed on one allocated on A; dry-run writes of the driver's slices for "
        "node B, for no node, and of node B's published slice are refused. IMP-9 judges the same accounts against the "
        "KEP's minimum. An account that also serves a central writer (one ServiceAccount for a controller and the "
        "per-node daemons) and holds the writer's `arbitrary-node:*` fails here saying both cannot hold, naming both "
        "parts and the right; without that right IMP-9 fails it",
        skips="bindingModel other than node-local; no per-node part with a ServiceAccount (a `perNode` process, a "
        "`serviceAccounts` entry with `runs: per-node` or `both`; a central writer is IMP-9's); fewer than two nodes",
    ),
}
