"""The real kubelet path after attach-before-bind (NODE-1..3): what kwok nodes cannot show.

One pod, pinned to a node without node-local devices, gets a fabric device as in attach-before-bind (for a node-local
readiness gate: one of its node's own devices with binding conditions); on a node with
a real kubelet its container must then start with the device: the kubelet called NodePrepareResources of the
driver's kubelet plugin for the claim, got CDI device names back and handed them to the container runtime, which
applied the CDI spec's edits. The spec must be written after the binding, once the fabric lists the device attached
to that node (NODE-2). Read from the node itself (kind: the node is a Docker container): crictl's view of the
container (the CDI devices the kubelet asked for, the environment the container runs with) and the CDI specs on the
node (which file resolves each device, and when it was written). Then the pod and claim are deleted and the node and
the fabric probe are sampled together: the device's CDI spec must be gone (NodeUnprepareResources) no later than the
fabric stops listing the device attached to the node (a detach while the container may still use the device is the
failure).

Skipped with the reason where no node runs a kubelet (kwok) or the node's insides cannot be read (not kind).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from conformance.cluster.kind.nodeexec import NodeExecError, cdi_specs, inspect_container, resolve
from conformance.cluster.manifests import pinned_pod
from conformance.cluster.nodes import KWOK_NODE_ANNOTATION
from conformance.implementation.profile import LoadedProfile
from conformance.observe.recorder import Recorder
from conformance.suite.implementation.outcome import follow
from conformance.suite.implementation.start import own_devices, started
from conformance.suite.scenario import Context, result_fixture, scenario, skip_for_profile

START_TIMEOUT_S = 120.0
RELEASE_SLACK_S = 30.0  # beyond the promised detachSeconds, how long the release is followed
DESCRIPTION = "after attach-before-bind its container starts with the CDI device; released: unprepared, detached"


@dataclass
class KubeletPath:
    node: str
    identity: str | None
    bound_at: float  # the pod's PodScheduled transition (epoch seconds, whole seconds as the API gives them)
    started: bool
    container: str = ""
    cdi_devices: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # CDI names no spec on the node resolves
    missing_env: list[str] = field(default_factory=list)  # edits of a resolved device absent from the container
    prepared_at: dict[str, float] = field(default_factory=dict)  # spec file written for this claim -> mtime
    static: list[str] = field(default_factory=list)  # resolving spec files that were there before the pod
    # Spec files written while the device was not attached to the node: what the fabric probe's first answer sent
    # at or after the file's mtime said of the device ((node, state) or None).
    unattached: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    # Release: seconds from the deletion until the spec was gone / the probe no longer listed the device attached.
    spec_gone_s: float | None = None
    detached_s: float | None = None
    detached_with_spec: bool = False  # a probe answer without the device attached while its spec was still there
    notes: list[str] = field(default_factory=list)


# The fabric probe only for NODE-3 (unprepared before detached): NODE-1 and NODE-2 read the node alone, so they run for
# every binding model (a node-local readiness gate's device too: start.own_devices).
@scenario("kubelet-path", DESCRIPTION, ("NODE-1", "NODE-2", "NODE-3"), probe_for=("NODE-3",))
def kubelet_path(ctx: Context) -> KubeletPath:
    if ctx.cluster.info.provider != "kind":
        pytest.skip(
            f"the node's container runtime and CDI specs are read on kind's node containers, not on "
            f"--provider {ctx.cluster.info.provider}"
        )
    node, lease, ns = own_devices(ctx)
    if KWOK_NODE_ANNOTATION in (ctx.cluster.core.read_node(node).metadata.annotations or {}):
        pytest.skip(f"{node} is a kwok node: no kubelet prepares claims there")
    probe = ctx.probe  # None: NODE-3 is skipped (probe_for), the release is not followed
    before = {s.path for s in cdi_specs(node)}  # a spec already there is the driver's own, not this claim's
    with ctx.history(ns) as history:
        ctx.objects.create(pinned_pod("app", "gpu", node), ns)
        bound = follow(ctx, history, node)
        if bound.binding is None:
            raise AssertionError(f"the pod never bound, nothing for a kubelet to start:\n  {bound.describe()}")
        pod = started(ctx, ns, node, START_TIMEOUT_S)
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    identity = next((i for i in bound.final_identities() if i), None) or next(iter(lease.identities), None)
    seen = KubeletPath(node, identity, scheduled.last_transition_time.timestamp(), started=True)
    seen.container = pod.status.container_statuses[0].container_id
    runtime = inspect_container(node, seen.container)
    specs = cdi_specs(node)
    seen.cdi_devices = runtime.cdi_devices
    files: set[str] = set()
    for name in runtime.cdi_devices:
        found = resolve(specs, name)
        if found is None:
            seen.unresolved.append(name)
            continue
        spec, edits = found
        if spec.path in before:
            seen.static.append(spec.path)
        else:
            files.add(spec.path)
            seen.prepared_at[spec.path] = spec.mtime
        seen.missing_env += [e for e in edits["env"] if e not in runtime.env]
    if identity:
        for path_, written in seen.prepared_at.items():
            fabric_said = probe.after(written).get(identity)
            if fabric_said != (node, "attached"):
                seen.unattached[path_] = fabric_said

    # Graceful: the kubelet stops the container and unprepares the claim before the pod object goes (then the
    # claim made from the template is deallocated and collected). A forced deletion would race the kubelet.
    ctx.cluster.core.delete_namespaced_pod("app", ns, grace_period_seconds=1)
    if probe is not None:
        _follow_release(seen, files, probe, ctx.profile.promises.detach_s + RELEASE_SLACK_S)
    if seen.spec_gone_s is not None:
        ctx.measure("release_to_unprepared_seconds", seen.spec_gone_s)
    return seen


def _follow_release(seen: KubeletPath, files: set[str], probe: Recorder, within_s: float) -> None:
    """Sample the node's CDI specs after each fabric probe answer (probe.now() waits for the next one) until both
    the claim's specs are gone and the device is no longer attached to the node, or `within_s` passed."""
    started = time.monotonic()
    while files and time.monotonic() - started < within_s and None in (seen.spec_gone_s, seen.detached_s):
        # The probe first: a spec read after an answer without the attachment outlived it for certain.
        attached = probe.now().get(seen.identity) if seen.identity else None
        try:
            present = {s.path for s in cdi_specs(seen.node)} & files
        except NodeExecError as exc:
            seen.notes.append(str(exc))  # this sample says nothing
            continue
        at = round(time.monotonic() - started, 3)
        if not present and seen.spec_gone_s is None:
            seen.spec_gone_s = at
        if attached != (seen.node, "attached") and seen.detached_s is None:
            seen.detached_s, seen.detached_with_spec = at, bool(present)


path = result_fixture("path", "kubelet-path")


@pytest.mark.requirement("NODE-1")
def test_the_container_starts_with_its_cdi_device(path: KubeletPath) -> None:
    assert path.cdi_devices, (
        f"the container {path.container} on {path.node} started without any CDI device: the kubelet got none from "
        "NodePrepareResources for the claim"
    )
    assert not path.unresolved, f"no CDI spec on {path.node} resolves {path.unresolved} (the container's devices)"
    assert not path.missing_env, (
        f"the container runs without the environment its CDI devices set: {path.missing_env} "
        f"(devices {path.cdi_devices})"
    )


def _claim_specs_or_skip(path: KubeletPath) -> None:
    if not path.cdi_devices:
        pytest.skip(
            f"the container {path.container} on {path.node} has no CDI device (NODE-1 fails): when the claim was "
            "prepared and unprepared cannot be read from its specs"
        )
    if not path.prepared_at and path.static:
        pytest.skip(
            f"the container's devices resolve only in CDI specs that were on {path.node} before the pod "
            f"({path.static}): when the driver prepared and unprepared this claim cannot be read from them"
        )


@pytest.mark.requirement("NODE-2")
def test_the_device_is_prepared_on_the_allocated_node_after_binding(path: KubeletPath) -> None:
    _claim_specs_or_skip(path)
    assert path.prepared_at, f"no CDI spec of the container's devices {path.cdi_devices} on {path.node}"
    # The API gives the binding to the second (truncated): a spec written before it is older than that second.
    early = {f: round(path.bound_at - t, 1) for f, t in path.prepared_at.items() if t < path.bound_at}
    assert not early, f"CDI specs written before the pod was bound to {path.node} (seconds before): {early}"
    # The fabric's truth: at (or after) the moment the spec was written, the device was still not attached there.
    assert not path.unattached, (
        f"CDI specs of {path.identity} written on {path.node} while the fabric did not list it attached there "
        f"(the fabric probe's first answer after each file was written: (node, state)): {path.unattached}"
    )


@pytest.mark.requirement("NODE-3")
def test_the_device_is_unprepared_before_it_is_detached(path: KubeletPath, profile: LoadedProfile) -> None:
    skip_for_profile("kubelet-path", "NODE-3", profile.profile)
    _claim_specs_or_skip(path)
    assert path.spec_gone_s is not None, (
        f"the CDI specs {sorted(path.prepared_at)} were still on {path.node} after the release "
        f"(NodeUnprepareResources not called){'; ' + '; '.join(path.notes) if path.notes else ''}"
    )
    assert not path.detached_with_spec, (
        f"the fabric stopped listing {path.identity} attached to {path.node} {path.detached_s}s after the release, "
        f"while its CDI spec was still there (gone at {path.spec_gone_s}s): detached before NodeUnprepareResources"
    )
