"""The kind provider: a real multi-node cluster in Docker containers, through pytest-kind's KindCluster.

pytest-kind (pinned) creates the cluster, or reuses one of the same name, loads images and deletes it; the suite
gives it the kind binary built from the Go module proxy (conformance.cluster.toolchain.kindbin) and the cached kubectl,
so nothing is downloaded from release sites. The configuration is generated for the requested release
(conformance.cluster.kind.config). The implementation runs inside the cluster from manifests (its profile, e.g.
fixtures/profiles/reference-kind.yaml); its fabric probe is reached through a NodePort published on 127.0.0.1.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException
from pytest_kind import KindCluster

from conformance.cluster.client import Cluster
from conformance.cluster.kind.config import AUDIT_LOG_FILE, CLUSTER_NAME, KindConfigError, write_kind_files
from conformance.cluster.kind.engine import Engine, EngineError, ensure_engine
from conformance.cluster.kind.images import REFERENCE_IMAGE, local_node_image
from conformance.cluster.kind.tools import missing_images
from conformance.cluster.nodes import wait_nodes_ready
from conformance.cluster.providers.base import FABRIC_LABEL, ClusterInfo, ClusterSpec, NodeSpec, ProviderNotReady
from conformance.cluster.providers.existing import mark_test_cluster
from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.toolchain.gobuild import Progress
from conformance.cluster.toolchain.kindbin import ensure_kind
from conformance.cluster.toolchain.source import KubeSource, source_from_env
from conformance.cluster.versions import parse_server_version

READY_TIMEOUT_S = 300.0
# pytest-kind's default --cluster-name; the suite's own name is used instead (the manifests name its nodes).
PYTEST_KIND_DEFAULT_NAME = "pytest-kind"


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def kind_workdir(name: str) -> Path:
    return Path(tempfile.gettempdir()) / "dra-conformance-kind" / name


class KindProvider:
    name = "kind"

    def __init__(
        self,
        *,
        cluster_name: str | None = None,
        image: str | None = None,
        kind_bin: str | None = None,
        kubectl_bin: str | None = None,
        kubeconfig: str | None = None,
        load_images: tuple[str, ...] = (REFERENCE_IMAGE,),
        progress: Progress = _print,
    ) -> None:
        self.cluster_name = cluster_name if cluster_name not in (None, PYTEST_KIND_DEFAULT_NAME) else CLUSTER_NAME
        self.image = image
        self.kind_bin = kind_bin
        self.kubectl_bin = kubectl_bin
        self.kubeconfig = kubeconfig
        self.load_images = load_images
        self.progress = progress
        self.cluster: KindCluster | None = None
        self.engine: Engine | None = None
        # The source of the node image built here (toolchain.source); None: kind's own image, or one given.
        self.source: KubeSource | None = None
        self.keep = False
        self.timings: dict[str, float] = {}

    @classmethod
    def from_options(cls, option: Callable[[str], Any], progress: Progress = _print) -> KindProvider:
        """Take pytest-kind's own options (--cluster-name, --kind-image, --kind-bin, --kind-kubectl-bin)."""
        images = os.environ.get("DRA_CONFORMANCE_KIND_IMAGES")
        return cls(
            cluster_name=option("--cluster-name"),
            image=option("--kind-image"),
            kind_bin=option("--kind-bin"),
            kubectl_bin=option("--kind-kubectl-bin"),
            kubeconfig=option("--kubeconfig"),
            load_images=tuple(images.split()) if images is not None else (REFERENCE_IMAGE,),
            progress=progress,
        )

    def start(self, spec: ClusterSpec) -> ClusterInfo:
        started = time.monotonic()
        try:
            # The running Docker; else a dockerd started for this run (stopped by stop()).
            self.engine = ensure_engine(self.progress)
        except EngineError as exc:
            raise ProviderNotReady(
                f"--provider kind needs a Docker engine: {exc}. Start Docker, or use --provider local "
                "(no Docker needed) or --provider existing --kubeconfig PATH"
            ) from None
        atexit.register(self.stop)
        if missing := missing_images(list(self.load_images)):
            self.stop()
            raise ProviderNotReady(
                f"images to load into the kind nodes are not in the local Docker engine: {missing}; "
                "build them with `make kind-image` (or set DRA_CONFORMANCE_KIND_IMAGES)"
            )
        # The node image `dra-conformance kind image` built here (no registry), else kind's own for the release.
        image = self.image or local_node_image(spec.version)
        self.source = source_from_env(spec.version.tag) if image and not self.image else None
        if image:
            self.progress(f"kind node image: {image}")
        elif source_from_env(spec.version.tag).patched:
            self.stop()
            raise ProviderNotReady(
                f"no kind node image of {source_from_env(spec.version.tag).describe()} (kind's own would be the "
                "release as published): build it with `make kind-image` and the same K8S_PATCHES / K8S_SOURCE"
            )
        kind = Path(self.kind_bin) if self.kind_bin else ensure_kind(progress=self.progress)
        kubectl = Path(self.kubectl_bin) if self.kubectl_bin else self._kubectl(spec)
        # The profile's processes (kubectl logs of the in-cluster components) find this kubectl first on PATH.
        os.environ["PATH"] = f"{kubectl.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        workdir = kind_workdir(self.cluster_name)
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            config = write_kind_files(
                workdir / "kind-config.yaml",
                workdir / "scheduler-config.yaml",
                spec.version,
                spec.binding_timeout_s,
                workers=len(spec.nodes),
                gate_overrides=spec.feature_gates,
                image=image,
                audit_dir=str(workdir / "audit") if spec.audit else None,
            )
        except KindConfigError as exc:
            self.stop()
            raise ProviderNotReady(str(exc)) from None
        kubeconfig = Path(self.kubeconfig) if self.kubeconfig else workdir / "kubeconfig"
        self.cluster = KindCluster(self.cluster_name, kubeconfig, kind_path=kind, kubectl_path=kubectl)
        self.keep = spec.keep
        self.progress(f"creating (or reusing) kind cluster {self.cluster_name} from {config}")
        try:
            self._export_kubeconfig(kind, kubeconfig)
            self.cluster.create(config_file=config)
            for image in self.load_images:
                self.cluster.load_docker_image(image)
            info = self._inspect(spec, kubeconfig, kubectl)
        except subprocess.CalledProcessError as exc:
            self.keep = False
            self.stop()
            command = " ".join(map(str, exc.cmd[:3]))
            raise ProviderNotReady(f"`{command}` failed (exit {exc.returncode}); its output is above") from None
        except BaseException:
            self.keep = False  # a half-started cluster is never worth keeping
            self.stop()
            raise
        self.timings["bring_up_s"] = time.monotonic() - started
        return info

    def _export_kubeconfig(self, kind: Path, kubeconfig: Path) -> None:
        """For a running cluster of that name that pytest-kind will reuse: it reads the kubeconfig, never writes it.

        Fails harmlessly (ignored) when there is no such cluster: pytest-kind then creates it and writes one.
        """
        if kubeconfig.exists() and kubeconfig.read_text().strip():
            return
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        cmd = [str(kind), "export", "kubeconfig", "--name", self.cluster_name, "--kubeconfig", str(kubeconfig)]
        subprocess.run(cmd, capture_output=True, timeout=60)

    def _kubectl(self, spec: ClusterSpec) -> Path:
        """The cached kubectl of the cluster's release (`--kind-kubectl-bin` overrides it): never the first one on
        PATH, which may be another release's (e.g. a cloud SDK's dispatcher) and skews against the server."""
        kubectl = ensure_binaries(spec.version, progress=self.progress).kubectl
        self.progress(f"kubectl: {kubectl} (the cached one of {spec.version})")
        return kubectl

    def _inspect(self, spec: ClusterSpec, kubeconfig: Path, kubectl: Path) -> ClusterInfo:
        release = spec.version.release
        gates = {name: True for name in release.gates} | spec.feature_gates
        probe = Cluster(ClusterInfo(self.cluster_name, self.name, kubeconfig, "", gates, 0, True, []))
        try:
            workers = [n for n in probe.core.list_node().items if FABRIC_LABEL in (n.metadata.labels or {})]
            nodes = sorted((NodeSpec(n.metadata.name, dict(n.metadata.labels)) for n in workers), key=lambda n: n.name)
            if len(nodes) < 2:
                raise ProviderNotReady(
                    f"kind cluster {self.cluster_name} has {len(nodes)} workers labelled {FABRIC_LABEL} (need 2+): "
                    f"a cluster reused from elsewhere? Delete it with `kind delete cluster --name {self.cluster_name}`"
                )
            wait_nodes_ready(probe.core, [n.name for n in nodes], READY_TIMEOUT_S)
            try:
                mark_test_cluster(probe.core, self.name)
            except ApiException as exc:
                if exc.status != 409:  # a reused cluster is marked already
                    raise
            version = parse_server_version(probe.server_version())
        finally:
            probe.close()
        timeout_on = release.binding_timeout_configurable and gates.get("DRADeviceBindingConditions", True)
        return ClusterInfo(
            name=self.cluster_name,
            provider=self.name,
            kubeconfig=kubeconfig,
            version=str(version),
            feature_gates=gates,
            binding_timeout_s=spec.binding_timeout_s if timeout_on else release.fixed_binding_timeout_seconds,
            binding_timeout_configurable=release.binding_timeout_configurable,
            nodes=nodes,
            kubectl=kubectl,
            source=self.source,
            # a cluster reused from elsewhere may have none: the reader then finds no file and says so
            audit_log=kind_workdir(self.cluster_name) / "audit" / AUDIT_LOG_FILE if spec.audit else None,
        )

    def stop(self) -> None:
        try:
            self._delete_cluster()
        finally:
            engine, self.engine = self.engine, None
            if engine is not None and engine.started_here and self.keep:
                self.progress(f"leaving the dockerd the suite started running for the kept cluster: {engine.keep()}")
            elif engine is not None:
                engine.stop()  # only a dockerd this run started

    def _delete_cluster(self) -> None:
        if self.cluster is None:
            return
        cluster, self.cluster = self.cluster, None
        if self.keep:
            self.progress(
                f"keeping kind cluster {cluster.name}: KUBECONFIG={cluster.kubeconfig_path}; "
                f"remove it with `kind delete cluster --name {cluster.name}`"
            )
            return
        cluster.delete()
        shutil.rmtree(kind_workdir(cluster.name), ignore_errors=True)
        shutil.rmtree(cluster.path, ignore_errors=True)  # pytest-kind's .pytest-kind/<name> in the working dir
        for parent in (kind_workdir(cluster.name).parent, Path(cluster.path).parent):
            with contextlib.suppress(OSError):  # only when empty: another cluster's folder may be there
                parent.rmdir()
        self.progress(f"kind cluster {cluster.name} deleted")
