"""Lay out a release's module sources with K8S_PATCHES applied, as a checkout-like tree the build replaces the
modules with: a copy of k8s.io/kubernetes at its root and, under staging/src/k8s.io/<name>/, a copy of each published
staging module a patch touches.

The go command refuses to overlay files in the module cache, and a module replaced by a folder keeps its module path
and version in the build cache's keys (with -trimpath), so the Go build cache still serves every package the patches
do not change: a patched build compiles the changed packages and what imports them, then links.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.toolchain.source import KubeSource

_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_STAGING_RE = re.compile(r"^staging/src/(k8s\.io/[^/]+)/")
# Not read by a module build of a dependency (vendor/), or not source at all.
_NOT_COPIED = {"vendor", ".git"}


def patched_paths(text: str) -> list[str]:
    """The repository paths a unified diff (git's or plain, -p1) reads or writes, in order, without /dev/null.

    Hunk bodies are skipped by their line counts: a removed line "-- x" is not a "--- " header."""
    found: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if hunk := _HUNK_RE.match(line):
            old, new = (int(count) if count is not None else 1 for count in (hunk[1], hunk[2]))
            while (old > 0 or new > 0) and index < len(lines):
                body = lines[index]
                index += 1
                if body.startswith("\\"):  # "\ No newline at end of file"
                    continue
                old -= body[:1] != "+"
                new -= body[:1] != "-"
        elif line.startswith(("--- ", "+++ ")):
            path = line[4:].split("\t", 1)[0].strip()
            path = path.split("/", 1)[1] if "/" in path and path != "/dev/null" else path
            if path != "/dev/null" and path not in found:
                found.append(path)
    return found


def staging_module(path: str) -> str | None:
    """The staging module (k8s.io/api, ...) a repository path is in; None for k8s.io/kubernetes itself."""
    if path.rsplit("/", 1)[-1] in ("go.mod", "go.sum"):
        raise BuildError(f"a patch changes {path}: a different module graph needs K8S_SOURCE (a checkout), not patches")
    match = _STAGING_RE.match(path)
    return match[1] if match else None


def prepare_tree(
    source: KubeSource, kubernetes_dir: Path, staging_dir: Callable[[str], Path], tree: Path
) -> tuple[dict[str, str], list[str]]:
    """Copy the module sources into `tree` and apply `source`'s patches in order (git apply: no fuzz; a patch that
    does not apply stops the build). Returns the replacements (module -> folder: k8s.io/kubernetes and each staging
    module a patch touches) and the repository paths the patches touch."""
    texts = []
    for patch in source.patches:
        text = patch.path.read_bytes()
        if hashlib.sha256(text).hexdigest() != patch.sha256:  # the cache entry's name says which content it holds
            raise BuildError(f"patch {patch.path} changed while the build waited: start it again")
        texts.append((patch.name, text))
    touched = [path for _name, text in texts for path in patched_paths(text.decode())]
    touched = list(dict.fromkeys(touched))
    _remove(tree)
    _copy(kubernetes_dir, tree)
    replaces = {"k8s.io/kubernetes": str(tree)}
    for module in dict.fromkeys(m for m in map(staging_module, touched) if m):
        _copy(staging_dir(module), tree / "staging" / "src" / module)
        replaces[module] = str(tree / "staging" / "src" / module)
    for name, text in texts:
        _git_apply(name, text, tree)
    return replaces, touched


def _copy(source: Path, dest: Path) -> None:
    """A writable copy (the module cache's files and folders are read-only), without vendor/."""
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = [d for d in dirnames if not (d in _NOT_COPIED and Path(dirpath) == source)]
        target = dest / Path(dirpath).relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            shutil.copyfile(Path(dirpath) / name, target / name)


def _remove(tree: Path) -> None:
    if tree.exists():
        for dirpath, _dirs, _files in os.walk(tree):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(tree)


def _git_apply(name: str, text: bytes, tree: Path) -> None:
    # The ceiling keeps git from taking a repository around the cache for the one to patch: outside a repository,
    # `git apply` patches plain files, and refuses a hunk that does not match exactly.
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tree.parent))
    cmd = ["git", "apply", "--whitespace=nowarn", "-p1", "-"]
    done = subprocess.run(cmd, cwd=tree, env=env, input=text, capture_output=True)
    if done.returncode != 0:
        raise BuildError(f"patch {name} does not apply to the release's sources:\n{done.stderr.decode().strip()}")
