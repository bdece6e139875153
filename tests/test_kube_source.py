"""A patched control plane (K8S_PATCHES / K8S_SOURCE): its identity, its cache entry, the tree its patches make."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from conformance.cluster.toolchain import build, source
from conformance.cluster.toolchain.cache import Cache
from conformance.cluster.toolchain.gobuild import BuildError
from conformance.cluster.toolchain.gomod import wrapper_gomod
from conformance.cluster.toolchain.patched import patched_paths, prepare_tree, staging_module
from conformance.cluster.versions import KWOK_VERSION, parse_version
from conformance.report.verdict import verdicts

PATCH = textwrap.dedent(
    """\
    diff --git a/pkg/a.go b/pkg/a.go
    --- a/pkg/a.go
    +++ b/pkg/a.go
    @@ -1,2 +1,2 @@
     package pkg
    -var X = 1
    +var X = 2
    diff --git a/pkg/new.go b/pkg/new.go
    new file mode 100644
    --- /dev/null
    +++ b/pkg/new.go
    @@ -0,0 +1 @@
    +package pkg
    diff --git a/staging/src/k8s.io/api/x.go b/staging/src/k8s.io/api/x.go
    --- a/staging/src/k8s.io/api/x.go
    +++ b/staging/src/k8s.io/api/x.go
    @@ -1 +1 @@
    -package api
    +package api // patched
    """
)


def _patches(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "fix"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_no_patches_is_the_release_as_published() -> None:
    found = source.source_from_env("v1.37.2", {})
    assert not found.patched and found.key == "v1.37.2" and found.describe() == "v1.37.2"
    assert found.as_dict() == {"release": "v1.37.2", "patched": False}


def test_patches_are_taken_in_name_order_and_keyed_by_content(tmp_path: Path) -> None:
    folder = _patches(tmp_path, **{"0002-b.patch": "b", "0001-a.diff": "a", "README.md": "not a patch"})
    first = source.source_from_env("v1.37.2", {"K8S_PATCHES": str(folder)})
    assert [p.name for p in first.patches] == ["0001-a.diff", "0002-b.patch"]
    assert first.key.startswith("v1.37.2+patched-") and first.key != "v1.37.2"
    assert first.describe().startswith("v1.37.2 patched: 0001-a.diff (sha256 ")
    recorded = first.as_dict()
    assert recorded["patched"] and [p["name"] for p in recorded["patches"]] == ["0001-a.diff", "0002-b.patch"]
    assert len(recorded["patches"][0]["sha256"]) == 64 and recorded["digest"] == first.digest
    (folder / "0002-b.patch").write_text("b, changed")
    assert source.with_patches("v1.37.2", folder).key != first.key, "another patch content is another build"
    assert source.with_patches("v1.38.0-beta.0", folder).key.startswith("v1.38.0-beta.0+patched-")


def test_unusable_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="not both"):
        source.source_from_env("v1.37.2", {"K8S_PATCHES": "x", "K8S_SOURCE": "y"})
    with pytest.raises(BuildError, match=r"no \.patch or \.diff file"):
        source.with_patches("v1.37.2", _patches(tmp_path, **{"notes.txt": "x"}))
    with pytest.raises(BuildError, match="no such file"):
        source.with_patches("v1.37.2", tmp_path / "missing")
    with pytest.raises(BuildError, match="not a checkout"):
        source.with_checkout("v1.37.2", tmp_path)


def test_a_checkout_is_keyed_by_its_tree(tmp_path: Path) -> None:
    tree = tmp_path / "kubernetes"
    (tree / "staging" / "src" / "k8s.io").mkdir(parents=True)
    (tree / "go.mod").write_text("module k8s.io/kubernetes\n\ngo 1.26.0\n")
    (tree / "pkg").mkdir()
    (tree / "pkg" / "a.go").write_text("package pkg\n")
    found = source.source_from_env("v1.37.2", {"K8S_SOURCE": str(tree)})
    assert found.key.startswith("v1.37.2+source-") and found.as_dict()["checkout"]["path"] == str(tree)
    (tree / "vendor").mkdir()
    (tree / "vendor" / "x.go").write_text("ignored\n")
    assert source.with_checkout("v1.37.2", tree).key == found.key, "vendor/ is not what a module build reads"
    (tree / "pkg" / "a.go").write_text("package pkg // changed\n")
    assert source.with_checkout("v1.37.2", tree).key != found.key


def test_the_paths_of_a_patch() -> None:
    assert patched_paths(PATCH) == ["pkg/a.go", "pkg/new.go", "staging/src/k8s.io/api/x.go"]
    # A removed line "-- x" and an added line "++ y" inside a hunk look like headers; the hunk's counts tell.
    dashes = "--- a/f.go\n+++ b/f.go\n@@ -1,2 +1,2 @@\n--- x\n+++ y\n context\n\\ No newline at end of file\n"
    assert patched_paths(dashes + "--- a/g.go\n+++ b/g.go\n@@ -1 +1 @@\n-a\n+b\n") == ["f.go", "g.go"]


def test_go_mod_changes_need_a_checkout() -> None:
    with pytest.raises(BuildError, match="K8S_SOURCE"):
        staging_module("staging/src/k8s.io/api/go.mod")
    assert staging_module("staging/src/k8s.io/api/core/v1/types.go") == "k8s.io/api"
    assert staging_module("pkg/scheduler/scheduler.go") is None


def _module(root: Path, files: dict[str, str]) -> Path:
    """A read-only module folder, as in the module cache."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for dirpath, _dirs, names in os.walk(root, topdown=False):
        for name in names:
            os.chmod(Path(dirpath) / name, 0o444)
        os.chmod(dirpath, 0o555)
    return root


def test_the_patched_tree_replaces_the_modules_the_patches_touch(tmp_path: Path) -> None:
    kubernetes = _module(tmp_path / "kubernetes@v1.37.2", {"pkg/a.go": "package pkg\nvar X = 1\n", "vendor/v.go": ""})
    api = _module(tmp_path / "api@v0.37.2", {"x.go": "package api\n"})
    folder = _patches(tmp_path, **{"0001-fix.patch": PATCH})
    tree = tmp_path / "entry" / "patched"
    for _ in range(2):  # a second preparation starts afresh
        replaces, touched = prepare_tree(
            source.with_patches("v1.37.2", folder), kubernetes, lambda module: {"k8s.io/api": api}[module], tree
        )
    assert replaces == {"k8s.io/kubernetes": str(tree), "k8s.io/api": str(tree / "staging/src/k8s.io/api")}
    assert touched == ["pkg/a.go", "pkg/new.go", "staging/src/k8s.io/api/x.go"]
    assert (tree / "pkg/a.go").read_text() == "package pkg\nvar X = 2\n" and (tree / "pkg/new.go").exists()
    assert (tree / "staging/src/k8s.io/api/x.go").read_text() == "package api // patched\n"
    assert not (tree / "vendor").exists(), "a module build of a dependency never reads vendor/"
    assert (kubernetes / "pkg/a.go").read_text() == "package pkg\nvar X = 1\n", "the module cache is untouched"


def test_a_patch_that_does_not_apply_stops_the_build(tmp_path: Path) -> None:
    kubernetes = _module(tmp_path / "kubernetes@v1.37.2", {"pkg/a.go": "package pkg\nvar X = 3\n"})
    folder = _patches(tmp_path, **{"0001-fix.patch": PATCH.split("diff --git a/pkg/new.go")[0]})
    with pytest.raises(BuildError, match=r"0001-fix\.patch does not apply"):
        prepare_tree(source.with_patches("v1.37.2", folder), kubernetes, lambda m: tmp_path, tmp_path / "o")


def test_a_patch_changed_after_its_hash_was_taken_stops_the_build(tmp_path: Path) -> None:
    folder = _patches(tmp_path, **{"0001-fix.patch": PATCH})
    taken = source.with_patches("v1.37.2", folder)
    (folder / "0001-fix.patch").write_text(PATCH + "\n")
    with pytest.raises(BuildError, match="changed while the build waited"):
        prepare_tree(taken, tmp_path, lambda m: tmp_path, tmp_path / "o")


def test_a_checkout_is_the_module_itself() -> None:
    text = wrapper_gomod(
        "w", "1.26", {"k8s.io/kubernetes": "v1.37.2"}, ["t"], {"k8s.io/api": "v0.37.2", "k8s.io/kubernetes": "/src/k"}
    )
    assert "\tk8s.io/api => k8s.io/api v0.37.2\n" in text and "\tk8s.io/kubernetes => /src/k\n" in text


def _complete_entry(cache: Cache, key: str) -> None:
    kube = cache.component("kubernetes", key)
    kube.bin.mkdir(parents=True, exist_ok=True)
    for name in build.KUBE_COMMANDS:
        kube.binary(name).write_text("")
        os.chmod(kube.binary(name), 0o755)
    kube.save_record({"etcd_version": "v3.6.0"})
    for component, version, names in (("etcd", "v3.6.0", ["etcd"]), ("kwok", KWOK_VERSION, build.KWOK_COMMANDS)):
        entry = cache.component(component, version)
        entry.bin.mkdir(parents=True, exist_ok=True)
        for name in names:
            entry.binary(name).write_text("")
            os.chmod(entry.binary(name), 0o755)


def test_patched_binaries_come_from_their_own_cache_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache(tmp_path / "cache")
    patched = source.with_patches("v1.37.2", _patches(tmp_path, **{"0001-fix.patch": PATCH}))
    _complete_entry(cache, "v1.37.2")
    _complete_entry(cache, patched.key)
    monkeypatch.setenv("K8S_PATCHES", str(tmp_path / "fix"))
    found = build.ensure_binaries(parse_version("1.37.2"), cache, progress=lambda _m: None)
    assert found.source == patched
    assert found.kube["kube-scheduler"] == cache.component("kubernetes", patched.key).binary("kube-scheduler")
    monkeypatch.delenv("K8S_PATCHES")
    plain = build.ensure_binaries(parse_version("1.37.2"), cache, progress=lambda _m: None)
    assert plain.kube["kube-scheduler"] == cache.component("kubernetes", "v1.37.2").binary("kube-scheduler")
    assert plain.source is not None and not plain.source.patched


def test_the_cluster_verdict_of_a_patched_control_plane_says_so() -> None:
    patched = "v1.37.2 patched: 0001-fix.patch (sha256 0123456789ab)"
    found = verdicts({}, patched=patched)
    assert found["cluster"].shown == f"success (patched control plane: {patched})"
    assert found["cluster"].as_dict()["patched"] == patched and "patched" not in found["implementation"].as_dict()
    assert verdicts({})["cluster"].shown == "success", "a release as published says nothing more"
