"""kind's base and node images for a release, built here from Debian packages and Go module proxy builds.

The base image follows kind KIND_VERSION's images/base/Dockerfile: a debootstrap'd Debian with its packages, kind's
own images/base/files, the same systemd clean-up, containerd, runc (Debian's), crictl and the CNI plugins. The node
image is `kind build node-image --type file` of a look-alike kubernetes-server tarball: kubeadm, kubelet, kubectl
and image archives of the control plane (each a static binary on an empty image), kube-proxy, and every image
kubeadm and kind's default manifests name (etcd, CoreDNS, pause, kind's CNI, local-path storage). kindnetd is not
served by the module proxy: a stand-in sets the routes to other nodes' pod CIDRs and writes a ptp CNI config.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from conformance.cluster.kind.components import NodeBinaries
from conformance.cluster.kind.engine import missing_capabilities
from conformance.cluster.kind.rootfs import (
    Progress,
    build,
    chroot,
    debootstrap,
    digest,
    import_folder,
    run,
    save_archive,
)
from conformance.cluster.versions import KIND_VERSION, KubeVersion

BASE_PACKAGES = [
    "systemd",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "ca-certificates",
    "jq",
    "procps",
    "e2fsprogs",
    "runc",
    "socat",
    "ebtables",
    "bash",
]
# kind KIND_VERSION's pkg/build/nodeimage/const_cni.go and const_storage.go: images its manifests name.
KINDNETD_IMAGE = "docker.io/kindest/kindnetd:v20260820-69b56db7"
LOCAL_PATH_IMAGE = "docker.io/kindest/local-path-provisioner:v20260820-69b56db7"
LOCAL_PATH_HELPER_IMAGE = "docker.io/kindest/local-path-helper:v20260131-7181c60a"
KIND_PAUSE_VERSION = "3.10"  # images/base/files/etc/containerd/config.toml sandbox_image
HASH_LABEL = "dra-conformance.inputs"
KINDNET_STAND_IN = Path(__file__).with_name("kindnet-stand-in.sh")


@dataclass(frozen=True)
class BaseInputs:
    kind_src: Path  # the sigs.k8s.io/kind module (images/base/files)
    binaries: NodeBinaries

    def hash(self) -> str:
        b = self.binaries
        return digest(
            KIND_VERSION,
            " ".join(BASE_PACKAGES),
            " ".join(missing_capabilities()),
            str(_cgroup_v1()),
            Path(__file__),
            self.kind_src / "images" / "base" / "files",
            *b.containerd.values(),
            b.crictl,
            *b.cni.values(),
        )


def _cgroup_v1() -> bool:
    return not Path("/sys/fs/cgroup/cgroup.controllers").exists()


def build_base(inputs: BaseInputs, tag: str, workdir: Path, progress: Progress) -> str:
    """kind's base image as `tag` (its id returned)."""
    root = workdir / "base-rootfs"
    debootstrap(root, BASE_PACKAGES, progress)
    files = inputs.kind_src / "images" / "base" / "files"
    progress("base image: kind's images/base/files, systemd clean-up, containerd, crictl, CNI plugins")
    # As the Dockerfile's COPY --chmod: 0644, scripts 0755 (the module cache's files are read-only).
    for source in sorted(files.rglob("*")):
        dest = root / source.relative_to(files)
        if source.is_dir():
            dest.mkdir(mode=0o755, parents=True, exist_ok=True)
            continue
        shutil.copyfile(source, dest)
        dest.chmod(0o755 if dest.parent in (root / "usr/local/bin", root / "kind/bin") else 0o644)
    b = inputs.binaries
    for name, path in b.containerd.items():
        shutil.copy2(path, root / "usr/local/bin" / name)
    shutil.copy2(b.crictl, root / "usr/local/bin/crictl")
    (root / "opt/cni/bin").mkdir(parents=True, exist_ok=True)
    for name, path in b.cni.items():
        shutil.copy2(path, root / "opt/cni/bin" / name)
    # As images/base/Dockerfile: no unit of the distribution starts on its own in a node container.
    cleanup = (
        "find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete; "
        "rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* "
        "/lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* "
        "/lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*; "
        "echo ReadKMsg=no >> /etc/systemd/journald.conf; ln -sf /usr/lib/systemd/systemd /sbin/init; "
        "systemctl enable kubelet.service containerd.service undo-mount-hacks.service; "
        "systemctl mask systemd-binfmt.service; mkdir -p /etc/kubernetes/manifests"
    )
    chroot(root, "sh", "-ec", cleanup, what="base image systemd set-up")
    spec = json.loads(chroot(root, "ctr", "oci", "spec", what="ctr oci spec"))
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    (root / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))
    config = root / "etc/containerd/config.toml"
    if "CAP_SYS_RESOURCE" in missing_capabilities():
        # runc in the node cannot lower oom_score_adj without it (pod sandboxes fail "can't get final child's PID").
        config.write_text(config.read_text().replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true"))
    if _cgroup_v1():
        # kubelet 1.35+ refuses cgroup v1 unless told.
        kubelet = root / "etc/default/kubelet"
        kubelet.write_text(kubelet.read_text().rstrip("\n") + " --fail-cgroupv1=false\n")
    changes = [
        "ENV container=docker",
        'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
        f"LABEL {HASH_LABEL}={inputs.hash()}",
    ]
    image = import_folder(root, tag, changes, stop_signal="SIGRTMIN+3")
    shutil.rmtree(root, ignore_errors=True)
    return image


def _static_image(tag: str, binary: Path, dest: str, entrypoint: list[str] | None = None) -> None:
    """One static binary on an empty image (at `dest`), on PATH; an empty /tmp."""
    lines = ["FROM scratch", f"COPY bin {dest}", "COPY tmp /tmp", "ENV PATH=/usr/local/bin:/usr/bin:/bin"]
    if entrypoint:
        lines.append(f"ENTRYPOINT {json.dumps(entrypoint)}")
    with tempfile.TemporaryDirectory(prefix="dra-tmp-") as empty:
        build(tag, "\n".join(lines) + "\n", {"bin": binary, "tmp": Path(empty)})


def component_images(
    version: KubeVersion, b: NodeBinaries, base_tag: str, workdir: Path, progress: Progress
) -> dict[str, list[str]]:
    """Build every image the node preloads; archive name -> tags (kube-proxy.tar carries all the others)."""
    tag = version.tag.replace("+", "_")
    kube = {
        name: f"registry.k8s.io/{name}:{tag}"
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
    }
    progress(
        "component images: control plane, etcd, CoreDNS, pause (static binaries), kube-proxy, kind's CNI and storage"
    )
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        _static_image(kube[name], b.control_plane.kube[name], f"/usr/local/bin/{name}")
    etcd = f"registry.k8s.io/etcd:{b.etcd_image_tag}"
    _static_image(etcd, b.control_plane.etcd, "/usr/local/bin/etcd")
    coredns = f"registry.k8s.io/coredns/coredns:{b.coredns_version}"
    _static_image(coredns, b.coredns, "/coredns", ["/coredns"])
    pause_bin = workdir / "pause"
    source = b.kubernetes_src / "build" / "pause" / "linux" / "pause.c"
    run(
        ["gcc", "-Os", "-Wall", "-static", f"-DVERSION=v{b.pause_version}", "-o", str(pause_bin), str(source)],
        what="gcc pause.c",
    )
    pauses = sorted({f"registry.k8s.io/pause:{b.pause_version}", f"registry.k8s.io/pause:{KIND_PAUSE_VERSION}"})
    for pause in pauses:
        _static_image(pause, pause_bin, "/pause", ["/pause"])
    build(
        kube["kube-proxy"],
        f"FROM {base_tag}\nCOPY kube-proxy /usr/local/bin/kube-proxy\n",
        {"kube-proxy": b.node["kube-proxy"]},
    )
    build(
        KINDNETD_IMAGE,
        f"FROM {base_tag}\nCOPY kubectl /usr/local/bin/kubectl\nCOPY stand-in /usr/local/bin/kindnetd\n"
        'ENTRYPOINT ["/usr/local/bin/kindnetd"]\n',
        {"kubectl": b.control_plane.kubectl, "stand-in": KINDNET_STAND_IN},
    )
    _static_image(LOCAL_PATH_IMAGE, b.local_path, "/usr/local/bin/local-path-provisioner")
    build(LOCAL_PATH_HELPER_IMAGE, f"FROM {base_tag}\n", {})
    extras = [kube["kube-proxy"], etcd, coredns, *pauses, KINDNETD_IMAGE, LOCAL_PATH_IMAGE, LOCAL_PATH_HELPER_IMAGE]
    return {
        "kube-apiserver.tar": [kube["kube-apiserver"]],
        "kube-controller-manager.tar": [kube["kube-controller-manager"]],
        "kube-scheduler.tar": [kube["kube-scheduler"]],
        "kube-proxy.tar": extras,
    }


def server_tarball(
    version: KubeVersion, b: NodeBinaries, archives: dict[str, list[str]], workdir: Path, progress: Progress
) -> Path:
    """A kubernetes-server-linux-amd64.tar.gz look-alike: kubernetes/version and kubernetes/server/bin/."""
    top = workdir / "server" / "kubernetes"
    bin_dir = top / "server" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (top / "version").write_text(version.tag + "\n")
    for name, path in (
        ("kubeadm", b.node["kubeadm"]),
        ("kubelet", b.node["kubelet"]),
        ("kubectl", b.control_plane.kubectl),
    ):
        shutil.copy2(path, bin_dir / name)
    for name, tags in archives.items():
        progress(f"saving {name} ({len(tags)} images)")
        save_archive(tags, bin_dir / name)
    out = workdir / "kubernetes-server-linux-amd64.tar.gz"
    progress(f"writing {out.name}")
    with tarfile.open(out, "w:gz", compresslevel=1) as tar:
        tar.add(top, arcname="kubernetes")
    shutil.rmtree(workdir / "server")
    return out


def kind_build_node_image(
    kind: Path, tarball: Path, base_tag: str, tag: str, workdir: Path, progress: Progress
) -> None:
    """`kind build node-image --type file`; its k8s-tar-extract-* folders go to workdir (removed by the caller)."""
    progress(f"kind build node-image --type file ({tag})")
    env = dict(os.environ, TMPDIR=str(workdir))
    cmd = [str(kind), "build", "node-image", "--type", "file", str(tarball), "--base-image", base_tag, "--image", tag]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"`kind build node-image` failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    for line in (proc.stdout + proc.stderr).splitlines():
        if re.search(r"completed|Building", line):
            progress(f"  kind: {line.strip()}")
