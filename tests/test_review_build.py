"""`review --run --build` builds only the releases the cache lacks, oldest first, and names a failed build's cause.
The build itself is a stand-in here (a unit test: a cold build takes 10-25 min)."""

from __future__ import annotations

import pytest

from conformance.cli import review
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.versions import parse_version


def test_only_missing_releases_are_built_oldest_first_and_a_failure_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    cached = {"1.36.3"}
    built: list[str] = []

    def ensure(version: object) -> None:
        built.append(str(version))
        if str(version) == "1.38.0-beta.0":
            raise BuildError("go: module k8s.io/kubernetes@v1.38.0-beta.0 requires go >= 1.27\nmore")
        cached.add(str(version))

    monkeypatch.setattr(review, "_cached", lambda v: str(v) in cached)
    monkeypatch.setattr("conformance.cluster.toolchain.build.ensure_binaries", ensure)
    versions = [parse_version(v) for v in ("1.38.0-beta.0", "1.36.3", "1.35.4", "1.34.4")]
    failed = review._build_missing(versions)
    assert built == ["1.34.4", "1.35.4", "1.38.0-beta.0"]
    assert failed == {
        "1.38.0-beta.0": "its build failed: go: module k8s.io/kubernetes@v1.38.0-beta.0 requires go >= 1.27"
    }
