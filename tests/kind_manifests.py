"""Where the reference implementation's kind manifests are, and how to read them (shared by unit and selftests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "fake-drivers" / "deploy"
KIND_OVERLAY = ROOT / "fake-drivers" / "kind"
PROFILE = ROOT / "fixtures" / "profiles" / "reference-kind.yaml"
NAMESPACE = "dra-fabric-system"


def kustomize_files(folder: Path) -> list[Path]:
    """The YAML files a kustomization (and the ones it includes) lists, in order; no generators are used."""
    files: list[Path] = []
    for entry in yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]:
        path = (folder / entry).resolve()
        files += kustomize_files(path) if path.is_dir() else [path]
    return files


def manifest_objects(files: list[Path]) -> list[dict[str, Any]]:
    return [doc for f in files for doc in yaml.safe_load_all(f.read_text()) if doc]
