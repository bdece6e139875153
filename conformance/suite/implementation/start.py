"""The usual start of an implementation scenario that applies to every binding model (IMP-17, the kubelet path): a
node, a lease of the implementation's devices with binding conditions there, and a namespace with a claim template
for exactly those. Where the devices come from follows the profile's binding model: a fabric model's reach a node
without node-local devices (Context.remote_fabric); a node-local readiness gate's sit on their own node."""

from __future__ import annotations

from typing import Any

from conformance.cluster.manifests import claim_template
from conformance.cluster.waits import wait_for
from conformance.observe.devices import Lease
from conformance.suite.implementation.context import Context
from conformance.suite.implementation.readiness import gated_node


def own_devices(ctx: Context, count: int = 1, template: str = "gpu") -> tuple[str, Lease, str]:
    """(node, lease, namespace): `count` of the implementation's devices with binding conditions that a pod pinned to
    `node` can get, and a claim template `template` for them."""
    if ctx.profile.has_fabric:
        return ctx.remote_fabric(count, template, exclusive=ctx.counted)
    node, lease = gated_node(ctx, count)
    ns = ctx.namespace()
    ctx.objects.create(claim_template(template, ctx.device_class(lease)), ns)
    return node, lease, ns


def started(ctx: Context, ns: str, node: str, timeout: float, pod: str = "app") -> Any:
    """The pod (as read) once its container has started on `node` (a real kubelet ran it), waited up to `timeout`."""
    return wait_for(
        lambda: ctx.cluster.core.read_namespaced_pod(pod, ns),
        lambda p: bool(p.status.container_statuses and p.status.container_statuses[0].started),
        timeout=timeout,
        expected=f"the container of {ns}/{pod} to start on {node}",
        describe=lambda p: f"phase={p.status.phase} statuses={p.status.container_statuses}" if p else "-",
        transient=(Exception,),
    )
