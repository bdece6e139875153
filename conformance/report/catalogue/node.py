"""NODE requirements: the node-local half of the path, on nodes with a real kubelet (the container starts with its CDI
device, prepared on the allocated node after binding, unprepared before the detach)."""

from __future__ import annotations

from conformance.report.catalogue.model import Applies, Doc, Requirement, _fabric, _r

_NODE = "KEP-4381 (DRA) / kubelet plugin: NodePrepareResources, NodeUnprepareResources, CDI"

# The node-local half, on nodes with a real kubelet (kind): kwok nodes run none, so elsewhere these are skipped,
# which is why they are SHOULD (a MUST skipped would make every kwok run partial).
REQUIREMENTS: tuple[Requirement, ...] = (
    _r("NODE-1", "implementation", "SHOULD", "the pod's container starts with the CDI device prepared for it", _NODE),
    _r("NODE-2", "implementation", "SHOULD", "NodePrepareResources on the allocated node, not before binding", _NODE),
    _r("NODE-3", "implementation", "SHOULD", "after the release, NodeUnprepareResources before the detach", _NODE),
    _r(
        "NODE-4",
        "implementation",
        "SHOULD",
        "a force-deleted pod's device is neither detached nor attached elsewhere before NodeUnprepareResources",
        _NODE,
    ),
)

APPLIES: dict[str, Applies] = {
    "NODE-3": _fabric("it orders the kubelet's unprepare before the fabric's detach"),
    "NODE-4": _fabric("it orders the kubelet's unprepare before the fabric's detach and the next attach"),
}

_NODE_SKIPS = "where nodes run no kubelet (kwok) or the node's insides cannot be read (any provider but kind)"
DOCS: dict[str, Doc] = {
    "NODE-1": Doc(
        "kubelet-path: a pod pinned to a node without node-local devices gets a leased fabric device (for a node-local "
        "readiness gate: a node's own device with binding conditions) and binds; on a node with a real kubelet its "
        "container must start, and crictl on the node must show CDI devices for it that resolve in a CDI spec on "
        "that node, with every environment edit of those devices in the container",
        skips=_NODE_SKIPS,
    ),
    "NODE-2": Doc(
        "kubelet-path: the CDI spec files that resolve the container's devices and were not on the node before the "
        "pod (the ones written for this claim) must be newer than the pod's PodScheduled transition, and the fabric "
        "probe's first answer sent at or after each file was written must list the device attached to that node: "
        "prepared on the allocated node, not before the binding, never a device not attached there",
        skips=_NODE_SKIPS + "; when the devices resolve only in specs that were there before the pod (static specs)",
    ),
    "NODE-3": Doc(
        "kubelet-path: the pod is deleted gracefully (the kubelet unprepares before the pod object goes); the node's "
        "CDI specs are read after each fabric probe answer: the claim's specs must go, and no probe answer may show "
        "the device no longer attached to the node while a spec read after it is still there",
        skips=_NODE_SKIPS + "; when the devices resolve only in specs that were there before the pod (static specs)",
    ),
    "NODE-4": Doc(
        "force-delete: a pod pinned to a node gets a leased fabric device and its container starts; a second pod "
        "pinned to another node that device reaches waits for it (identified entries); the first pod is "
        "force-deleted (grace period 0) while its container runs. The control plane then releases the claim at once "
        "(kube-controller-manager clears it as soon as the pod object is gone, before the kubelet has stopped the "
        "container; kubernetes/kubernetes#141471) and kube-scheduler may allocate the device to the second pod. The "
        "node's CDI specs are read after each fabric probe answer until the claim's spec is gone "
        "(NodeUnprepareResources): no probe answer received before a read that still found the spec may show the "
        "device anything but attached to the first node (a detach begun, or an attach for the second pod's node). "
        "What the control plane, kube-scheduler and the kubelet did is recorded with the outcome (seconds from the "
        "force delete: claim released, device allocated to the second pod, container ended, unprepared) and never "
        "fails the implementation",
        skips=_NODE_SKIPS
        + "; when the devices resolve only in specs that were there before the pod (static specs); not staged when "
        "the control plane released the claim only after the node had unprepared it (nothing to hold then)",
    ),
}
