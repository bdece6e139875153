"""Debian root filesystems (debootstrap) and the Docker images made from them or from a few files: no registry.

Images come from `docker import` of a folder (Docker 20.10 refuses --change STOPSIGNAL there: a two-line
`docker build` adds it) or from `docker build` on a local base or FROM scratch, never from a registry image.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

Progress = Callable[[str], None]
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("DRA_CONFORMANCE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
DOCKER_TIMEOUT_S = 1800.0
# The legacy builder: Docker 20.10's engine with a newer client and no buildx plugin.
BUILD_ENV = dict(os.environ, DOCKER_BUILDKIT="0")


class ImageBuildError(RuntimeError):
    """A step of an image build failed; the message carries the command's last words."""


def run(cmd: list[str], *, what: str, timeout: float = DOCKER_TIMEOUT_S, **kwargs: object) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise ImageBuildError(
            f"{what}: `{' '.join(map(str, cmd[:4]))} ...` failed:\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return proc.stdout


def debootstrap(target: Path, packages: Iterable[str], progress: Progress) -> None:
    """A minimal Debian DEBIAN_SUITE in `target` with `packages` (from the Debian mirror, as apt uses)."""
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    include = ",".join(sorted(packages))
    progress(f"debootstrap {DEBIAN_SUITE} (minbase + {include}) into {target}")
    cmd = ["debootstrap", "--variant=minbase", f"--include={include}", DEBIAN_SUITE, str(target), DEBIAN_MIRROR]
    run(cmd, what="debootstrap", timeout=1800)
    # apt's lists and caches are no part of an image.
    for folder in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (target / folder).glob("*"):
            if item.is_file():
                item.unlink()


def chroot(root: Path, *cmd: str, what: str) -> str:
    return run(
        ["chroot", str(root), *cmd],
        what=what,
        env=dict(os.environ, PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
    )


def import_folder(root: Path, tag: str, changes: list[str], stop_signal: str | None = None) -> str:
    """`docker import` of the folder as `tag` (numeric owners kept); returns the image id."""
    cmd = ["docker", "import", *[arg for change in changes for arg in ("--change", change)], "-", tag]
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-cf", "-", "."], stdout=subprocess.PIPE)
    try:
        run(cmd, what=f"docker import {tag}", stdin=tar.stdout)
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
    if stop_signal:
        build(tag, f"FROM {tag}\nSTOPSIGNAL {stop_signal}\n", {})
    return image_id(tag)


def build(tag: str, dockerfile: str, files: dict[str, Path], labels: dict[str, str] | None = None) -> str:
    """`docker build` of `dockerfile` with `files` (name in the context -> source) as its context; the image id."""
    with tempfile.TemporaryDirectory(prefix="dra-image-") as tmp:
        context = Path(tmp)
        for name, source in files.items():
            dest = context / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, dest, symlinks=True)
            else:
                try:
                    os.link(source, dest)
                except OSError:
                    shutil.copy2(source, dest)
        (context / "Dockerfile").write_text(dockerfile)
        cmd = [
            "docker",
            "build",
            "-q",
            "-t",
            tag,
            *[f"--label={k}={v}" for k, v in (labels or {}).items()],
            str(context),
        ]
        run(cmd, what=f"docker build {tag}", env=BUILD_ENV)
    return image_id(tag)


def image_id(tag: str) -> str:
    return run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], what=f"inspect {tag}").strip()


def image_label(tag: str, label: str) -> str | None:
    """The image's label value; None when the image is not there (or has no such label)."""
    proc = subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{index .Config.Labels "{label}"}}}}', tag],
        capture_output=True,
        text=True,
        timeout=60,
    )
    value = proc.stdout.strip()
    return value if proc.returncode == 0 and value and value != "<no value>" else None


def save_archive(tags: list[str], out: Path) -> None:
    """`docker save` of `tags` into one archive whose `repositories` comes first and names every image fully.

    kind's node-image build reads the tags of an archive from its first `repositories` or `manifest.json` entry,
    and the latter only for manifest[0]; Docker writes docker.io images without their registry, which kind would
    not match with the names kubeadm and its manifests ask for (and would try to pull).
    """
    with tempfile.TemporaryDirectory(prefix="dra-save-", dir=out.parent) as tmp:
        raw = Path(tmp) / "raw.tar"
        run(["docker", "save", "-o", str(raw), *tags], what=f"docker save {tags}")
        with tarfile.open(raw) as src:
            manifest = json.load(src.extractfile("manifest.json"))  # type: ignore[arg-type]
            repositories: dict[str, dict[str, str]] = {}
            for entry in manifest:
                layer = entry["Layers"][-1].split("/")[0]
                for repo_tag in entry.get("RepoTags") or []:
                    repo, tag = repo_tag.rsplit(":", 1)
                    repositories.setdefault(_full_name(repo), {})[tag] = layer
            data = json.dumps(repositories).encode()
            with tarfile.open(out, "w") as dst:
                info = tarfile.TarInfo("repositories")
                info.size, info.mode = len(data), 0o644
                dst.addfile(info, fileobj=io.BytesIO(data))
                for member in src.getmembers():
                    if member.name != "repositories":
                        dst.addfile(member, src.extractfile(member) if member.isfile() else None)


def _full_name(repo: str) -> str:
    first = repo.split("/", 1)[0]
    if "/" in repo and ("." in first or ":" in first or first == "localhost"):
        return repo
    return f"docker.io/{repo}" if "/" in repo else f"docker.io/library/{repo}"


def digest(*parts: str | bytes | Path) -> str:
    """A short content hash of strings, bytes, files and folders (every file under a folder, by relative path)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            files = sorted(p for p in part.rglob("*") if p.is_file()) if part.is_dir() else [part]
            for file in files:
                h.update(str(file.relative_to(part) if part.is_dir() else file.name).encode())
                with file.open("rb") as f:
                    for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                        h.update(chunk)
        else:
            h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]
