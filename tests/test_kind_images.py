"""Pieces of `dra-conformance kind image` that run without a Docker engine: the runc wrapper dockerd is given where
capabilities are missing (run for real on a bundle, with a stand-in for runc that records its arguments), the
archive names kind's node-image build matches, and the inputs hash that decides a rebuild."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conformance.cluster.kind.engine import _WRAPPER
from conformance.cluster.kind.rootfs import _full_name, digest

CAPS = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]


def _wrapper(tmp_path: Path) -> tuple[Path, Path]:
    said = tmp_path / "runc-args"
    real = tmp_path / "runc"
    real.write_text(f'#!/bin/sh\necho "$@" > {said}\n')
    real.chmod(0o755)
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(_WRAPPER.format(drop=["CAP_SYS_RESOURCE"], real=str(real)))
    wrapper.chmod(0o755)
    return wrapper, said


def test_the_runc_wrapper_drops_the_missing_capability_from_the_bundle_and_runs_runc(tmp_path: Path) -> None:
    wrapper, said = _wrapper(tmp_path)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    caps = {key: list(CAPS) for key in ("bounding", "effective", "permitted")}
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": caps}, "root": {"path": "rootfs"}}))
    args = ["--root", "/run/x", "create", "--bundle", str(bundle), "--pid-file", "p", "ctr-1"]
    subprocess.run([str(wrapper), *args], check=True, timeout=30)
    spec = json.loads((bundle / "config.json").read_text())
    assert spec["process"]["capabilities"] == {k: ["CAP_CHOWN", "CAP_NET_ADMIN"] for k in caps}
    assert spec["root"] == {"path": "rootfs"}
    assert said.read_text().split() == args


def test_the_runc_wrapper_edits_an_exec_process_file(tmp_path: Path) -> None:
    wrapper, said = _wrapper(tmp_path)
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "capabilities": {"bounding": list(CAPS)}}))
    subprocess.run([str(wrapper), "exec", "--process", str(process), "ctr-1"], check=True, timeout=30)
    assert json.loads(process.read_text())["capabilities"] == {"bounding": ["CAP_CHOWN", "CAP_NET_ADMIN"]}
    assert said.read_text().split() == ["exec", "--process", str(process), "ctr-1"]


def test_archive_names_are_the_full_names_kubeadm_and_kind_ask_for() -> None:
    assert _full_name("kindest/kindnetd") == "docker.io/kindest/kindnetd"
    assert _full_name("registry.k8s.io/etcd") == "registry.k8s.io/etcd"
    assert _full_name("registry.k8s.io/coredns/coredns") == "registry.k8s.io/coredns/coredns"
    assert _full_name("busybox") == "docker.io/library/busybox"


def test_the_inputs_hash_follows_file_contents(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "a.go").write_text("package a\n")
    first = digest("v1", folder)
    assert digest("v1", folder) == first
    (folder / "a.go").write_text("package a // changed\n")
    assert digest("v1", folder) != first
    assert digest("v2", folder) != digest("v1", folder)
