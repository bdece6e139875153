"""Apply K8S_PATCHES to a release's module source as a `go build -overlay`: patched copies of the files the patches
touch, beside the cache entry, and the module cache left as it is, so the Go build cache still serves every package
the patches do not change (a patched rebuild compiles those packages and what imports them, then links).

Paths in a patch are the repository's (a/pkg/..., b/staging/src/k8s.io/api/...): staging/src/k8s.io/<name>/ maps to
the published module k8s.io/<name> the build uses, everything else to the k8s.io/kubernetes module.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.toolchain.source import KubeSource

_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_STAGING_RE = re.compile(r"^staging/src/(k8s\.io/[^/]+)/(.+)$")


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


def module_file(path: str, kubernetes_dir: Path, staging_dir: Callable[[str], Path]) -> Path:
    """The file of the build's module sources that repository path `path` stands for."""
    name = path.rsplit("/", 1)[-1]
    if name in ("go.mod", "go.sum"):
        raise BuildError(f"a patch changes {path}: a different module graph needs K8S_SOURCE (a checkout), not patches")
    if match := _STAGING_RE.match(path):
        return staging_dir(match[1]) / match[2]
    return kubernetes_dir / path


def prepare_overlay(
    source: KubeSource, kubernetes_dir: Path, staging_dir: Callable[[str], Path], workdir: Path
) -> tuple[Path, list[str]]:
    """Apply `source`'s patches, in order, to copies of the files they touch under workdir/tree, and write
    workdir/overlay.json (module file -> patched copy, "" for a file a patch deletes). Returns the overlay and the
    repository paths it replaces. A patch that does not apply cleanly stops the build (git apply: no fuzz)."""
    tree = workdir / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    touched: list[str] = []
    for patch in source.patches:
        text = patch.path.read_bytes()
        if hashlib.sha256(text).hexdigest() != patch.sha256:  # the cache entry's name says which content it holds
            raise BuildError(f"patch {patch.path} changed while the build waited: start it again")
        for path in patched_paths(text.decode()):
            if path in touched:
                continue
            touched.append(path)
            original = module_file(path, kubernetes_dir, staging_dir)
            if original.is_file():
                copy = tree / path
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(original, copy)
                copy.chmod(0o644)  # the module cache's files are read-only
        _git_apply(patch.name, text, tree)
    replace = {
        str(module_file(path, kubernetes_dir, staging_dir)): str(tree / path) if (tree / path).is_file() else ""
        for path in touched
    }
    overlay = workdir / "overlay.json"
    overlay.write_text(json.dumps({"Replace": replace}, indent=2, sort_keys=True) + "\n")
    return overlay, touched


def _git_apply(name: str, text: bytes, tree: Path) -> None:
    # The ceiling keeps git from taking a repository around the cache for the one to patch: outside a repository,
    # `git apply` patches plain files, and refuses a hunk that does not match exactly.
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tree.parent))
    done = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-p1", "-"], cwd=tree, env=env, input=text, capture_output=True
    )
    if done.returncode != 0:
        raise BuildError(f"patch {name} does not apply to the release's sources:\n{done.stderr.decode().strip()}")
