"""`dra-conformance kind image`: the kind node image of a release and the reference image, with no registry.

Each image carries the hash of its inputs in a label (rootfs.HASH_LABEL): a second call with the same release and
inputs builds nothing; a changed input rebuilds that image and those made from it. The engine is the running
Docker, else a dockerd started for the build and stopped after it (engine.py). Intermediate images (the component
images saved into the node image) and kind's k8s-tar-extract-* folders are removed; the three images stay, cached.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.cluster.kind.components import ensure_node_binaries
from conformance.cluster.kind.engine import ensure_engine
from conformance.cluster.kind.nodeimage import (
    HASH_LABEL,
    KINDNET_STAND_IN,
    BaseInputs,
    build_base,
    component_images,
    kind_build_node_image,
    server_tarball,
)
from conformance.cluster.kind.pull import registry_node_image_usable
from conformance.cluster.kind.refimage import build_reference, inputs_hash
from conformance.cluster.kind.rootfs import build, digest, image_label
from conformance.cluster.toolchain.build import _download
from conformance.cluster.toolchain.cache import default_cache_root
from conformance.cluster.toolchain.kindbin import ensure_kind
from conformance.cluster.toolchain.source import source_from_env
from conformance.cluster.versions import KIND_VERSION, KubeVersion

Progress = Callable[[str], None]
BASE_IMAGE = f"dra-conformance/kind-base:{KIND_VERSION}"
NODE_REPOSITORY = "dra-conformance/kind-node"
# The manifests (fake-drivers/deploy) and the kind provider name it.
REFERENCE_IMAGE = "dra-fake-drivers:0.1.0"


def node_image_tag(version: KubeVersion) -> str:
    """The release's tag, or its patched source's cache key (K8S_PATCHES / K8S_SOURCE): one image per source."""
    return f"{NODE_REPOSITORY}:{source_from_env(version.tag).key.replace('+', '_')}"


def local_node_image(version: KubeVersion) -> str | None:
    """The node image `kind image` built for `version`, if the engine has it."""
    tag = node_image_tag(version)
    return tag if image_label(tag, HASH_LABEL) else None


@dataclass
class Built:
    """What a call did: per image "built" or "cached", and the seconds of each step."""

    images: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def build_images(
    version: KubeVersion, *, node: str = "auto", reference: bool = True, progress: Progress = print
) -> Built:
    """Build what is missing or stale. node: "auto" (only where kind's own image cannot be had), "build", "skip"."""
    done = Built()
    started = time.monotonic()
    engine = ensure_engine(progress)
    root = default_cache_root() / "kind-build"
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="build-", dir=root))  # kind's k8s-tar-extract-* land here too
    try:
        # kind's own image is the release as published: never one for patched sources (K8S_PATCHES / K8S_SOURCE).
        published = not source_from_env(version.tag).patched
        if node == "auto" and published and registry_node_image_usable(version, progress):
            progress(f"kind's own node image for {version} is usable: the ordinary kindest/node stays the default")
            node = "skip"
        if node != "skip":
            _node(version, workdir, done, progress)
        if reference:
            step = time.monotonic()
            wanted = inputs_hash()
            if image_label(REFERENCE_IMAGE, HASH_LABEL) == wanted:
                done.images[REFERENCE_IMAGE] = "cached"
            else:
                _remove([REFERENCE_IMAGE])  # the stale one would be left dangling
                build_reference(REFERENCE_IMAGE, HASH_LABEL, workdir, progress)
                done.images[REFERENCE_IMAGE] = "built"
            done.seconds["reference"] = round(time.monotonic() - step, 1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        engine.stop()
    done.seconds["total"] = round(time.monotonic() - started, 1)
    return done


def _node(version: KubeVersion, workdir: Path, done: Built, progress: Progress) -> None:
    step = time.monotonic()
    kind = ensure_kind(progress=progress)
    binaries = ensure_node_binaries(version, progress=progress)
    kind_src = Path(_download("sigs.k8s.io/kind", KIND_VERSION, workdir / "kind-src", progress)["Dir"])
    done.seconds["binaries"] = round(time.monotonic() - step, 1)
    step = time.monotonic()
    base = BaseInputs(kind_src, binaries)
    base_hash = base.hash()
    if image_label(BASE_IMAGE, HASH_LABEL) == base_hash:
        done.images[BASE_IMAGE] = "cached"
    else:
        _remove([BASE_IMAGE])
        build_base(base, BASE_IMAGE, workdir, progress)
        done.images[BASE_IMAGE] = "built"
    done.seconds["base"] = round(time.monotonic() - step, 1)
    step = time.monotonic()
    tag = node_image_tag(version)
    # The recipe is nodeimage.py's (in base_hash); this module only orchestrates.
    node_hash = digest(base_hash, KINDNET_STAND_IN, *binaries.paths(), *binaries.node.values())
    if image_label(tag, HASH_LABEL) == node_hash:
        done.images[tag] = "cached"
    else:
        _remove([tag])
        archives = component_images(version, binaries, BASE_IMAGE, workdir, progress)
        try:
            tarball = server_tarball(version, binaries, archives, workdir, progress)
        finally:
            _remove(sorted({t for tags in archives.values() for t in tags}))
        kind_build_node_image(kind, tarball, BASE_IMAGE, tag, workdir, progress)
        tarball.unlink()
        build(tag, f"FROM {tag}\n", {}, labels={HASH_LABEL: node_hash})
        done.images[tag] = "built"
    done.seconds["node"] = round(time.monotonic() - step, 1)


def _remove(tags: list[str]) -> None:
    if tags:
        subprocess.run(["docker", "rmi", *tags], capture_output=True, timeout=300)
