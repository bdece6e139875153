"""Where built binaries live: a per-user cache outside the repository, keyed by component and version."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def default_cache_root() -> Path:
    """$DRA_CONFORMANCE_CACHE, else $XDG_CACHE_HOME/dra-conformance, else ~/.cache/dra-conformance."""
    if explicit := os.environ.get("DRA_CONFORMANCE_CACHE"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dra-conformance"


@dataclass(frozen=True)
class ComponentDir:
    """The cache folder of one component at one version: bin/, src/ (wrapper module) and build.json."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def src(self) -> Path:
        return self.root / "src"

    def binary(self, name: str) -> Path:
        return self.bin / name

    def has(self, names: list[str]) -> bool:
        return all(os.access(self.binary(n), os.X_OK) for n in names)

    def record(self) -> dict[str, Any]:
        """What the last build wrote (per-binary time and size, resolved versions); {} if none."""
        path = self.root / "build.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def save_record(self, record: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / "build.json.tmp"
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.root / "build.json")


@dataclass(frozen=True)
class Cache:
    root: Path

    def component(self, name: str, version: str) -> ComponentDir:
        return ComponentDir(self.root / name / version)
