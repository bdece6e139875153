"""Any running cluster from a kubeconfig: a vendor's cluster with real hardware, or a local cluster kept running.

The suite only adds labelled objects there and removes them again, but a conformance run still creates
ResourceSlices, DeviceClasses and pods: it refuses a cluster that carries no test-cluster marker unless the user
says so explicitly. Before any test it checks what the scenarios need and says what is missing.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import device, resource_slice
from conformance.cluster.providers.base import ClusterInfo, ClusterSpec, NodeSpec, ProviderNotReady
from conformance.cluster.toolchain.gobuild import Progress
from conformance.cluster.versions import UnsupportedVersion, parse_server_version, supported_minors

# kube-system/ConfigMap that marks a cluster as fit for conformance runs (the local provider sets it).
MARKER_NAMESPACE = "kube-system"
MARKER_NAME = "dra-conformance-test-cluster"


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def mark_test_cluster(core: client.CoreV1Api, provider: str) -> None:
    body = {"metadata": {"name": MARKER_NAME}, "data": {"createdBy": f"dra-conformance provider {provider}"}}
    core.create_namespaced_config_map(MARKER_NAMESPACE, body)


class ExistingProvider:
    name = "existing"

    def __init__(
        self,
        kubeconfig: str | None,
        *,
        allow_unmarked: bool = False,
        scheduler_url: str | None = None,
        progress: Progress = _print,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.allow_unmarked = allow_unmarked
        # kube-scheduler's secure port where this machine reaches it (--scheduler-url), for BASE-2 to read its gates.
        self.scheduler_url = scheduler_url.rstrip("/") if scheduler_url else None
        self.progress = progress

    def start(self, spec: ClusterSpec) -> ClusterInfo:
        if not self.kubeconfig:
            raise ProviderNotReady("--provider existing needs --kubeconfig PATH")
        path = Path(self.kubeconfig).expanduser()
        if not path.is_file():
            raise ProviderNotReady(f"--kubeconfig {path}: no such file")
        probe = Cluster(ClusterInfo("existing", self.name, path, "", {}, spec.binding_timeout_s, True, []))
        try:
            return self._inspect(probe, spec, path)
        except ApiException as exc:
            raise ProviderNotReady(
                f"cluster of {path} refused the preflight checks: {exc.status} {exc.reason}"
            ) from None
        finally:
            probe.close()

    def _inspect(self, cluster: Cluster, spec: ClusterSpec, kubeconfig: Path) -> ClusterInfo:
        try:
            git_version = cluster.server_version()
        except Exception as exc:  # connection refused, TLS, auth: all mean "cannot use this cluster"
            raise ProviderNotReady(f"cannot reach the cluster of {kubeconfig}: {exc}") from None
        try:
            # Pre-releases (v1.38.0-beta.0) are kept: the release table knows what they do.
            version = parse_server_version(git_version)
        except UnsupportedVersion as exc:
            known = supported_minors()
            raise ProviderNotReady(f"cluster runs {git_version}: {exc} (the suite knows {known})") from None
        self._check_marker(cluster)
        missing = self._missing_features(cluster)
        if missing:
            raise ProviderNotReady(
                f"cluster of {kubeconfig} ({git_version}) lacks what the scenarios need: " + "; ".join(missing)
            )
        nodes = [NodeSpec(n.metadata.name, dict(n.metadata.labels or {})) for n in cluster.core.list_node().items]
        release = version.release
        self.progress(f"using existing cluster {git_version} ({len(nodes)} nodes) from {kubeconfig}")
        return ClusterInfo(
            name=kubeconfig.stem,
            provider=self.name,
            kubeconfig=kubeconfig,
            version=str(version),
            feature_gates={},  # not readable from outside; the preflight checked the apiserver's behaviour
            binding_timeout_s=spec.binding_timeout_s
            if release.binding_timeout_configurable
            else release.fixed_binding_timeout_seconds,
            binding_timeout_configurable=release.binding_timeout_configurable,
            nodes=nodes,
            scheduler_endpoint=self.scheduler_url,
        )

    def _check_marker(self, cluster: Cluster) -> None:
        try:
            cluster.core.read_namespaced_config_map(MARKER_NAME, MARKER_NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
            if not self.allow_unmarked:
                raise ProviderNotReady(
                    f"the cluster has no ConfigMap {MARKER_NAMESPACE}/{MARKER_NAME}, the marker of a test cluster. "
                    f"The suite creates DRA objects and pods there. Mark it with `kubectl -n {MARKER_NAMESPACE} "
                    f"create configmap {MARKER_NAME}`, or pass --allow-unmarked-cluster"
                ) from None
            self.progress("warning: running on a cluster without the test-cluster marker (--allow-unmarked-cluster)")

    def _missing_features(self, cluster: Cluster) -> list[str]:
        """What the apiserver lacks, seen by behaviour: a server-side dry-run keeps binding fields only if gated on."""
        missing = []
        resources = {r.name for r in client.ResourceV1Api(cluster.api).get_api_resources().resources}
        for needed in ("resourceslices", "resourceclaims", "resourceclaims/status", "deviceclasses"):
            if needed not in resources:
                missing.append(f"resource.k8s.io/v1 {needed} is not served")
        if missing:
            return missing
        driver = f"preflight-{uuid.uuid4().hex[:8]}.conformance.example.com"
        conditions = {
            "bindsToNode": True,
            "bindingConditions": [f"{driver}/ready"],
            "bindingFailureConditions": [f"{driver}/failed"],
        }
        body = resource_slice(f"{driver}-preflight", driver, "preflight", [device("d", **conditions)], all_nodes=True)
        kept = cluster.kind(body["apiVersion"], "ResourceSlice").create(body=body, dry_run="All")
        if not kept.to_dict()["spec"]["devices"][0].get("bindingConditions"):
            missing.append(
                "kube-apiserver drops bindingConditions: enable the DRADeviceBindingConditions "
                "(and DRAResourceClaimDeviceStatus) feature gates"
            )
        return missing

    def stop(self) -> None:
        """Nothing to delete: the cluster is not ours; the run's objects are removed by the tests' cleanup."""
