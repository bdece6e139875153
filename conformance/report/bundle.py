"""The results bundle a vendor submits: the reports folder as one tar.gz with a SHA-256 manifest inside.

`MANIFEST.sha256` (sha256sum format: `<hex>  <path>`) lists every file of the folder; `open_results` unpacks a
bundle, checks every checksum and refuses a bundle whose files do not match, so a re-rendered report is the
report of exactly what was run. `compare` lists the requirements whose outcome changed between two runs.
"""

from __future__ import annotations

import hashlib
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

MANIFEST = "MANIFEST.sha256"
BUNDLE = "results.tar.gz"


class BundleError(RuntimeError):
    """A bundle or folder that is not a complete, intact set of results."""


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    skip = {MANIFEST, BUNDLE}
    return sorted(p for p in folder.rglob("*") if p.is_file() and str(p.relative_to(folder)) not in skip)


def write_manifest(folder: Path) -> Path:
    lines = [f"{_digest(p)}  {p.relative_to(folder)}" for p in _files(folder)]
    path = folder / MANIFEST
    path.write_text("\n".join(lines) + "\n")
    return path


def make_bundle(folder: Path, out: Path | None = None) -> Path:
    """Write the manifest, then pack the folder (not an older bundle) into `out` (default <folder>/results.tar.gz)."""
    write_manifest(folder)
    target = out or folder / BUNDLE
    with tarfile.open(target, "w:gz") as tar:
        for path in [folder / MANIFEST, *_files(folder)]:
            if path.resolve() != target.resolve():
                tar.add(path, arcname=str(path.relative_to(folder)))
    return target


def verify(folder: Path) -> list[str]:
    """Problems with a folder against its manifest (missing, changed or unlisted files); empty when intact."""
    manifest = folder / MANIFEST
    if not manifest.exists():
        return [f"no {MANIFEST} in {folder}"]
    listed = {}
    for line in manifest.read_text().splitlines():
        digest, _, rel = line.partition("  ")
        listed[rel] = digest
    problems = []
    for rel, digest in listed.items():
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: listed in the manifest, missing")
        elif _digest(path) != digest:
            problems.append(f"{rel}: checksum differs from the manifest")
    extra = [str(p.relative_to(folder)) for p in _files(folder) if str(p.relative_to(folder)) not in listed]
    problems += [f"{rel}: not in the manifest" for rel in extra if rel != "report.html"]
    return problems


def open_results(source: Path) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """A folder with the results of `source` (a reports folder or a bundle); a bundle is unpacked into a temporary
    folder (returned, to be cleaned up by the caller) and its checksums verified."""
    if source.is_dir():
        return source, None
    if not tarfile.is_tarfile(source):
        raise BundleError(f"{source} is neither a reports folder nor a tar.gz bundle")
    tmp = tempfile.TemporaryDirectory(prefix="dra-results-")
    with tarfile.open(source, "r:gz") as tar:
        tar.extractall(tmp.name, filter="data")
    folder = Path(tmp.name)
    problems = verify(folder)
    if problems:
        tmp.cleanup()
        raise BundleError(f"{source} does not match its manifest:\n  " + "\n  ".join(problems))
    return folder, tmp


def load_report(source: Path) -> dict[str, Any]:
    folder, tmp = open_results(source)
    try:
        path = folder / "conformance-report.yaml"
        if not path.exists():
            raise BundleError(f"{source} has no conformance-report.yaml")
        return yaml.safe_load(path.read_text())
    finally:
        if tmp is not None:
            tmp.cleanup()


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, str]]:
    """Requirements whose outcome changed from `old` to `new`; `regression` when one that passed no longer does."""
    changes = []
    before, after = old.get("requirements") or {}, new.get("requirements") or {}
    for rid in [*before, *(r for r in after if r not in before)]:
        a = (before.get(rid) or {}).get("outcome", "absent")
        b = (after.get(rid) or {}).get("outcome", "absent")
        if a != b:
            reason = ((after.get(rid) or {}).get("reason") or "").strip().splitlines()
            changes.append(
                {
                    "requirement": rid,
                    "before": a,
                    "after": b,
                    "regression": str(a == "passed"),
                    "reason": reason[0] if reason else "",
                }
            )
    return changes
