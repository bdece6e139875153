"""The binaries of a kind node image, built from the Go module proxy into the cache (no registry, no release site).

kubelet, kubeadm and kube-proxy come from the same wrapper module and version stamp as the control plane
(toolchain.build); containerd, crictl, the CNI plugins, CoreDNS and local-path-provisioner at the versions kind
KIND_VERSION's images/ pin (or, for CoreDNS and etcd, the ones kubeadm of the release asks for). Static (CGO off).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from conformance.cluster.toolchain.build import Binaries, _Build, _build, _build_kubernetes, _download, ensure_binaries
from conformance.cluster.toolchain.cache import Cache, default_cache_root
from conformance.cluster.toolchain.gobuild import BuildError, Progress
from conformance.cluster.toolchain.gomod import parse_gomod
from conformance.cluster.toolchain.source import KubeSource
from conformance.cluster.versions import KubeVersion

NODE_COMMANDS = ["kubelet", "kubeadm", "kube-proxy"]
# kind v0.33.0's images/base/Dockerfile.
CONTAINERD_VERSION = "v2.3.4"
CRICTL_VERSION = "v1.36.0"
CNI_PLUGINS_VERSION = "v1.9.1"
# kind pins v0.0.34 (images/local-path-provisioner/Makefile); the module proxy serves up to v0.0.30, whose
# command line (start --helper-image --config) kind's storage manifest uses unchanged.
LOCAL_PATH_VERSION = "v0.0.30"
CNI_PLUGINS = {
    "host-local": "plugins/ipam/host-local",
    "loopback": "plugins/main/loopback",
    "ptp": "plugins/main/ptp",
    "bridge": "plugins/main/bridge",
    "portmap": "plugins/meta/portmap",
}


@dataclass(frozen=True)
class NodeBinaries:
    """Every binary a node image needs, and the image versions kubeadm of the release expects."""

    control_plane: Binaries
    node: dict[str, Path]  # kubelet, kubeadm, kube-proxy
    containerd: dict[str, Path]  # containerd, ctr, containerd-shim-runc-v2
    crictl: Path
    cni: dict[str, Path]
    coredns: Path
    local_path: Path
    kubernetes_src: Path  # the k8s.io/kubernetes module (build/pause/linux/pause.c)
    coredns_version: str  # kubeadm's CoreDNSVersion, e.g. v1.14.6
    etcd_image_tag: str  # kubeadm's DefaultEtcdVersion, e.g. 3.7.0-0
    pause_version: str  # kubeadm's PauseVersion

    def paths(self) -> list[Path]:
        return [
            *self.control_plane.kube.values(),
            self.control_plane.etcd,
            *self.node.values(),
            *self.containerd.values(),
            self.crictl,
            *self.cni.values(),
            self.coredns,
            self.local_path,
        ]


def _kubeadm_constants(kubernetes_src: Path) -> dict[str, str]:
    text = (kubernetes_src / "cmd" / "kubeadm" / "app" / "constants" / "constants.go").read_text()
    found = {}
    for name in ("CoreDNSVersion", "DefaultEtcdVersion", "PauseVersion"):
        match = re.search(rf'\b{name}\s*=\s*"([^"]+)"', text)
        if not match:
            raise BuildError(f"{name} not found in kubeadm's constants.go of {kubernetes_src}")
        found[name] = match[1]
    return found


def _module_build(
    cache: Cache, name: str, module: str, version: str, targets: dict[str, str], progress: Progress, **options: str
) -> dict[str, Path]:
    target = cache.component(name, version)
    if not target.has(list(targets)):
        info = _download(module, version, target.src, progress)
        go = parse_gomod(Path(info["GoMod"]).read_text()).go
        _build(_Build(name=name, module=module, version=version, targets=targets, go=go, **options), target, progress)
    return {binary: target.binary(binary) for binary in targets}


def ensure_node_binaries(version: KubeVersion, cache: Cache | None = None, progress: Progress = print) -> NodeBinaries:
    """The node image's binaries for `version`, each built first where missing (a second call builds nothing)."""
    cache = cache or Cache(default_cache_root())
    control_plane = ensure_binaries(version, cache, progress)
    source = control_plane.source or KubeSource(version.tag)
    node_dir = cache.component("kubernetes-node", source.key)  # kubelet & co. from the same (patched) source
    if not node_dir.has(NODE_COMMANDS):
        _build_kubernetes(version, node_dir, progress, NODE_COMMANDS, source=source)
    kubernetes_src = source.checkout or Path(_download("k8s.io/kubernetes", version.tag, node_dir.src, progress)["Dir"])
    constants = _kubeadm_constants(kubernetes_src)
    containerd = _module_build(
        cache,
        "containerd",
        "github.com/containerd/containerd/v2",
        CONTAINERD_VERSION,
        {
            name: f"github.com/containerd/containerd/v2/cmd/{name}"
            for name in ("containerd", "ctr", "containerd-shim-runc-v2")
        },
        progress,
        tags="no_aufs,no_zfs,no_btrfs,no_devmapper",
        ldflags=f"-X 'github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}' -s -w",
    )
    crictl = _module_build(
        cache,
        "cri-tools",
        "sigs.k8s.io/cri-tools",
        CRICTL_VERSION,
        {"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
        progress,
        ldflags=f"-X 'sigs.k8s.io/cri-tools/pkg/version.Version={CRICTL_VERSION}' -s -w",
    )["crictl"]
    cni = _module_build(
        cache,
        "cni-plugins",
        "github.com/containernetworking/plugins",
        CNI_PLUGINS_VERSION,
        {name: f"github.com/containernetworking/plugins/{path}" for name, path in CNI_PLUGINS.items()},
        progress,
    )
    coredns_version = constants["CoreDNSVersion"]
    coredns = _module_build(
        cache,
        "coredns",
        "github.com/coredns/coredns",
        coredns_version,
        {"coredns": "github.com/coredns/coredns"},
        progress,
    )["coredns"]
    local_path = _module_build(
        cache,
        "local-path-provisioner",
        "github.com/rancher/local-path-provisioner",
        LOCAL_PATH_VERSION,
        {"local-path-provisioner": "github.com/rancher/local-path-provisioner"},
        progress,
    )["local-path-provisioner"]
    return NodeBinaries(
        control_plane=control_plane,
        node={name: node_dir.binary(name) for name in NODE_COMMANDS},
        containerd=containerd,
        crictl=crictl,
        cni=cni,
        coredns=coredns,
        local_path=local_path,
        kubernetes_src=kubernetes_src,
        coredns_version=coredns_version,
        etcd_image_tag=constants["DefaultEtcdVersion"],
        pause_version=constants["PauseVersion"],
    )
