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


@pytest.mark.parametrize(
    ("go_directive", "version", "toolchain", "said_text"),
    [
        ("1.27.0", "v1.38.0-beta.0", "go1.27.3", "this machine's go 1.26.8 is older, so GOTOOLCHAIN=go1.27.3"),
        ("1.26.0", "v1.37.2", "local", "this machine's go 1.26.8"),
    ],
)
def test_the_download_runs_with_the_toolchain_the_module_asks_for(
    machine_go: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    go_directive: str,
    version: str,
    toolchain: str,
    said_text: str,
) -> None:
    calls = _fake_go(monkeypatch, tmp_path, go_directive)
    said: list[str] = []
    build._download("k8s.io/kubernetes", version, tmp_path / "src", said.append)
    assert [args[:2] for args, _ in calls] == [["list", "-m"], ["mod", "download"]], "go.mod read before the download"
    assert calls[1][1] == toolchain
    assert any(f"asks for go {go_directive}" in line and said_text in line for line in said), said


def test_an_exported_toolchain_is_kept_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOTOOLCHAIN", "go1.27.1")
    monkeypatch.setattr(gobuild, "local_go_version", lambda: "1.26.8")
    env = gobuild.go_env("1.26.0")
    assert env["GOTOOLCHAIN"] == "go1.27.1"
    assert "from the environment" in gobuild.toolchain_choice("1.26.0", env)
