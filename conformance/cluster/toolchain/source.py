"""Which Kubernetes source a control plane is built from: a release as published, the release with patches, or a
local checkout; and its identity (the cache key and what the reports record).

K8S_PATCHES=DIR (or one patch file) applies DIR's *.patch and *.diff files, in name order, to the k8s.io/kubernetes
module of the release (--k8s-version) that the builder fetches from the Go module proxy. K8S_SOURCE=PATH builds a
local checkout of kubernetes/kubernetes instead, stamped as the release --k8s-version names. Either is built once
into a cache entry of its own, keyed by content (the release and the sha256 of each patch, or of the checkout's
tree), beside the published release's entry, which it never touches.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from conformance.cluster.toolchain.gobuild import BuildError

PATCHES_ENV = "K8S_PATCHES"
SOURCE_ENV = "K8S_SOURCE"
PATCH_SUFFIXES = (".patch", ".diff")
# Not part of what a checkout builds from (the module build ignores vendor/; _output/ is make's).
_SKIPPED_DIRS = {".git", "_output", "vendor", "node_modules", ".cache"}


class SourceError(BuildError):
    """K8S_PATCHES or K8S_SOURCE does not name a usable source."""


class Patch(NamedTuple):
    """One patch file, applied in the order of its name; the sha256 of its content is part of the build's key."""

    name: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class KubeSource:
    """The source of one control-plane build."""

    release: str  # the release tag the build is stamped with, e.g. v1.37.2
    patches: tuple[Patch, ...] = ()
    checkout: Path | None = None
    tree_sha256: str = ""  # of the checkout's files (see tree_digest)
    checkout_commit: str = ""  # the checkout's HEAD, where it is a git work tree (informative; the tree hash decides)

    @property
    def patched(self) -> bool:
        return bool(self.patches) or self.checkout is not None

    @property
    def digest(self) -> str:
        """sha256 of what the build is made of beyond the release: each patch's name and hash, or the tree's hash."""
        h = hashlib.sha256(self.release.encode())
        for patch in self.patches:
            h.update(f"\0{patch.name}\0{patch.sha256}".encode())
        if self.checkout is not None:
            h.update(f"\0checkout\0{self.tree_sha256}".encode())
        return h.hexdigest()

    @property
    def key(self) -> str:
        """The cache entry's name: the release alone when published, else release+patched-<digest> (or +source-)."""
        if not self.patched:
            return self.release
        return f"{self.release}+{'source' if self.checkout is not None else 'patched'}-{self.digest[:12]}"

    def describe(self) -> str:
        """One line for logs and reports, e.g. `v1.37.2 patched: 0001-fix.patch (sha256 0123abcd4567)`."""
        if self.checkout is not None:
            commit = f", HEAD {self.checkout_commit[:12]}" if self.checkout_commit else ""
            return (
                f"{self.release} patched: local checkout {self.checkout} (tree sha256 {self.tree_sha256[:12]}{commit})"
            )
        if self.patches:
            names = ", ".join(f"{p.name} (sha256 {p.sha256[:12]})" for p in self.patches)
            return f"{self.release} patched: {names}"
        return self.release

    def as_dict(self) -> dict[str, Any]:
        """What a report records about the binaries' source (full hashes)."""
        out: dict[str, Any] = {"release": self.release, "patched": self.patched}
        if self.patches:
            out["patches"] = [{"name": p.name, "sha256": p.sha256, "path": str(p.path)} for p in self.patches]
        if self.checkout is not None:
            out["checkout"] = {"path": str(self.checkout), "treeSha256": self.tree_sha256}
            if self.checkout_commit:
                out["checkout"]["head"] = self.checkout_commit
        if self.patched:
            out["digest"] = self.digest
        return out


def published(release: str) -> KubeSource:
    return KubeSource(release)


def source_from_env(release: str, environ: Mapping[str, str] | None = None) -> KubeSource:
    """The source K8S_PATCHES or K8S_SOURCE name for `release` (a tag); the published release when neither is set."""
    environ = os.environ if environ is None else environ
    patches, checkout = environ.get(PATCHES_ENV, "").strip(), environ.get(SOURCE_ENV, "").strip()
    if patches and checkout:
        raise SourceError(f"set {PATCHES_ENV} or {SOURCE_ENV}, not both")
    if patches:
        return with_patches(release, Path(patches))
    if checkout:
        return with_checkout(release, Path(checkout))
    return published(release)


def with_patches(release: str, where: Path) -> KubeSource:
    """`release` with the patch file `where`, or every *.patch / *.diff file in the folder `where`, in name order."""
    where = where.expanduser().resolve()
    if where.is_dir():
        files = sorted((p for p in where.iterdir() if p.is_file() and p.suffix in PATCH_SUFFIXES), key=lambda p: p.name)
        if not files:
            raise SourceError(f"{PATCHES_ENV}={where}: no {' or '.join(PATCH_SUFFIXES)} file in this folder")
    elif where.is_file():
        files = [where]
    else:
        raise SourceError(f"{PATCHES_ENV}={where}: no such file or folder")
    return KubeSource(release, tuple(Patch(p.name, p, hashlib.sha256(p.read_bytes()).hexdigest()) for p in files))


def with_checkout(release: str, where: Path) -> KubeSource:
    """`release` as built from the checkout `where` (its go.mod must be k8s.io/kubernetes's, with staging/)."""
    where = where.expanduser().resolve()
    gomod = where / "go.mod"
    if not gomod.is_file() or not gomod.read_text().startswith("module k8s.io/kubernetes\n"):
        raise SourceError(f"{SOURCE_ENV}={where}: not a checkout of k8s.io/kubernetes (no go.mod of that module)")
    if not (where / "staging" / "src" / "k8s.io").is_dir():
        raise SourceError(f"{SOURCE_ENV}={where}: no staging/src/k8s.io (a module zip is not a checkout)")
    return KubeSource(release, checkout=where, tree_sha256=tree_digest(where), checkout_commit=_head(where))


def tree_digest(root: Path) -> str:
    """sha256 over every file of a checkout (relative path and content), except .git, vendor and build output."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _head(checkout: Path) -> str:
    try:
        done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
