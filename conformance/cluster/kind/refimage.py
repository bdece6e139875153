"""The reference implementation's image without a registry: a debootstrap'd Debian with its python3, the wheels
of fake-drivers and its pinned dependencies from PyPI in a venv, and the Go kubelet plugin built on the host.

The same content as fake-drivers/Dockerfile (which starts from registry images: `make image` where there is one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conformance.cluster.kind.rootfs import DEBIAN_SUITE, Progress, chroot, debootstrap, digest, import_folder, run

FAKE_DRIVERS = Path(__file__).resolve().parents[3] / "fake-drivers"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
VENV = "/opt/fake-drivers/venv"
COMMANDS = ("fake-fabric-manager", "fake-node-driver", "reference-controller")


def inputs_hash() -> str:
    plugin = FAKE_DRIVERS / "kubelet-plugin"
    return digest(
        DEBIAN_SUITE,
        " ".join(PACKAGES),
        Path(__file__),
        FAKE_DRIVERS / "pyproject.toml",
        FAKE_DRIVERS / "src",
        # the plugin's sources, not its tests (not in the image)
        *sorted(p for p in plugin.iterdir() if p.suffix in (".go", ".mod", ".sum") and not p.stem.endswith("_test")),
    )


def build_reference(tag: str, label: str, workdir: Path, progress: Progress) -> str:
    root = workdir / "reference-rootfs"
    debootstrap(root, PACKAGES, progress)
    wheels = root / "tmp" / "wheels"
    progress("reference image: wheels of fake-drivers and its dependencies (PyPI)")
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--wheel-dir", str(wheels)]
    run([*pip, str(FAKE_DRIVERS)], what="pip wheel fake-drivers", timeout=900)
    chroot(root, "python3", "-m", "venv", VENV, what="python3 -m venv")
    install = [f"{VENV}/bin/pip", "install", "-q", "--no-index", "--find-links", "/tmp/wheels", "dra-fake-drivers"]
    chroot(root, *install, what="pip install fake-drivers")
    shutil.rmtree(wheels)
    for command in COMMANDS:
        (root / "usr/local/bin" / command).symlink_to(f"{VENV}/bin/{command}")
    progress("reference image: the Go kubelet plugin (go build, CGO off)")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    out = root / "usr/local/bin" / "fake-kubelet-plugin"
    cmd = ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out), "."]
    proc = subprocess.run(cmd, cwd=FAKE_DRIVERS / "kubelet-plugin", env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"go build of the kubelet plugin failed:\n{proc.stderr[-3000:]}")
    changes = [
        "ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/usr/local/bin:/usr/bin:/bin",
        "WORKDIR /opt/fake-drivers",
        # Non-root by default; only the kubelet plugin's DaemonSet runs as root (kubelet and CDI host folders).
        "USER 65532:65532",
        'CMD ["fake-fabric-manager", "--help"]',
        f"LABEL {label}={inputs_hash()}",
    ]
    image = import_folder(root, tag, changes)
    shutil.rmtree(root, ignore_errors=True)
    return image
