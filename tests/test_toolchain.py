"""The builder picks the Go toolchain a module asks for before it downloads the module (fakes the go command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cluster.toolchain import build, gobuild


@pytest.fixture
def machine_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOTOOLCHAIN", raising=False)
    monkeypatch.setattr(gobuild, "local_go_version", lambda: "1.26.8")
    monkeypatch.setattr(gobuild, "NEWER_TOOLCHAIN", "go1.27.3")


def _fake_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, go_directive: str) -> list[tuple[list[str], str]]:
    """A go command that knows one module whose go.mod says `go <go_directive>`; records (args, GOTOOLCHAIN)."""
    gomod = tmp_path / "upstream.mod"
    gomod.write_text(f"module k8s.io/kubernetes\n\ngo {go_directive}\n")
    calls: list[tuple[list[str], str]] = []

    def go_json(args: list[str], _cwd: Path, env: dict[str, str], _what: str) -> list[dict]:
        calls.append((args, env["GOTOOLCHAIN"]))
        if args[:2] == ["mod", "download"] and env["GOTOOLCHAIN"] == "local" and go_directive > "1.26.8":
            raise gobuild.BuildError(f"requires go >= {go_directive} (running go 1.26.8; GOTOOLCHAIN=local)")
        return [{"GoMod": str(gomod), "Dir": str(tmp_path)}]

    monkeypatch.setattr(build, "go_json", go_json)
    return calls


def test_a_module_needing_a_newer_go_is_downloaded_with_the_newer_toolchain(
    machine_go: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _fake_go(monkeypatch, tmp_path, "1.27.0")
    said: list[str] = []
    build._download("k8s.io/kubernetes", "v1.38.0-beta.0", tmp_path / "src", said.append)
    assert [args[:2] for args, _ in calls] == [["list", "-m"], ["mod", "download"]]
    assert calls[1][1] == "go1.27.3"
    assert any("asks for go 1.27.0" in line and "GOTOOLCHAIN=go1.27.3" in line for line in said), said


def test_a_module_the_machine_can_build_uses_the_local_go(
    machine_go: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _fake_go(monkeypatch, tmp_path, "1.26.0")
    said: list[str] = []
    build._download("k8s.io/kubernetes", "v1.37.2", tmp_path / "src", said.append)
    assert calls[1][1] == "local"
    assert any("this machine's go 1.26.8" in line for line in said), said


def test_an_exported_toolchain_is_kept_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOTOOLCHAIN", "go1.27.1")
    monkeypatch.setattr(gobuild, "local_go_version", lambda: "1.26.8")
    env = gobuild.go_env("1.26.0")
    assert env["GOTOOLCHAIN"] == "go1.27.1"
    assert "from the environment" in gobuild.toolchain_choice("1.26.0", env)
