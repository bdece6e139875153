"""Harness parts a real stack needs (issue 12): setup/teardown hooks, restart roles, a private $HOME with the
kubeconfig, {env:NAME}, and HTTPS endpoints with their own CA and a bearer token. Real subprocesses and a real TLS
server on 127.0.0.1; no cluster (the profiles here apply no manifests)."""

from __future__ import annotations

import http.server
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from json_server import serving

from conformance.implementation import endpoints
from conformance.implementation.harness import Implementation, ImplementationFailed
from conformance.implementation.profile import API_VERSION, KIND, ProfileError, load_profile

PY = sys.executable
SLEEP = "import time; time.sleep(60)"  # a long-running process of the stack


def _impl(tmp_path: Path, **fields: object) -> Implementation:
    doc = {"apiVersion": API_VERSION, "kind": KIND, "name": "t", "version": "1", "driver": "d.example.com", **fields}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    return Implementation(load_profile(path), kubeconfig, tmp_path / "work")


def _write(path: str, text: str) -> list[str]:
    return [PY, "-c", f"import pathlib; pathlib.Path({path!r}).write_text({text!r})"]


def test_hooks_run_around_the_processes_in_order(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    append = "import sys, pathlib; p = pathlib.Path(sys.argv[1]); p.write_text(p.read_text() + sys.argv[2] + ' ')"
    trail.write_text("")
    impl = _impl(
        tmp_path,
        hooks={
            "setup": [{"name": "label-nodes", "command": [PY, "-c", append, str(trail), "setup"]}],
            "teardown": [{"name": "unlabel", "command": [PY, "-c", append, str(trail), "teardown"]}],
        },
        processes=[
            {
                "name": "p",
                "command": [PY, "-c", f"{append}; print('ready', flush=True); {SLEEP}", str(trail), "process"],
                "ready": {"log": "ready"},
            }
        ],
    )
    impl.start()
    assert trail.read_text() == "setup process "
    assert impl.stop() == []
    assert trail.read_text() == "setup process teardown "
    assert (impl.workdir / "setup-label-nodes.log").exists()


def test_a_failing_setup_hook_stops_the_start_with_its_output(tmp_path: Path) -> None:
    impl = _impl(tmp_path, hooks={"setup": [{"name": "bad", "command": [PY, "-c", "print('no fabric'); exit(3)"]}]})
    with pytest.raises(ImplementationFailed, match=r"setup bad exited with 3(.|\n)*no fabric"):
        impl.start()


def test_private_home_holds_the_processes_kubeconfig_and_env_placeholders_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACK_TOKEN", "s3cret")
    out = tmp_path / "seen"
    script = (
        "import os, pathlib; pathlib.Path(os.environ['OUT']).write_text("
        "pathlib.Path(os.environ['HOME'], '.kube', 'config').read_text() + os.environ['TOKEN'])"
    )
    impl = _impl(
        tmp_path,
        processes=[
            {"name": "p", "command": [PY, "-c", script], "home": True}
            | {"env": {"OUT": str(out), "TOKEN": "{env:STACK_TOKEN}"}}
        ],
    )
    impl.start()
    try:
        proc = impl.running[0].proc
        proc.wait(10)
        assert out.read_text() == "apiVersion: v1\nkind: Config\ns3cret"
    finally:
        impl.stop()
    monkeypatch.delenv("STACK_TOKEN")
    with pytest.raises(ProfileError, match=r"\$STACK_TOKEN is not set"):
        impl.resolve("{env:STACK_TOKEN}")


def test_roles_restart_a_process_or_run_a_restart_command(tmp_path: Path) -> None:
    marker = tmp_path / "restarted"
    impl = _impl(
        tmp_path,
        processes=[{"name": "ctl", "command": [PY, "-c", f"print('up', flush=True); {SLEEP}"], "ready": {"log": "up"}}],
        roles=[
            {"name": "condition-writer", "process": "ctl"},
            {"name": "attacher", "command": _write(str(marker), "yes")},
        ],
    )
    impl.start()
    try:
        first = impl.running[0].proc.pid
        roles = impl.loaded.profile.restartable()
        assert [r.name for r in roles] == ["condition-writer", "attacher"]
        # while_down runs once the killed process is gone and before the new one starts (IMP-8 attached-unreported)
        down: list[tuple[int | None, int]] = []
        old = impl.running[0].proc
        window: list[float] = []
        said = impl.restart_role(roles[0], window, lambda: down.append((old.poll(), len(impl.running))))
        assert impl.running[0].proc.pid != first and "killed ctl" in said
        assert down == [(-9, 0)], "killed (SIGKILL) and not started again yet"
        assert len(window) == 2 and window[0] <= window[1]
        with pytest.raises(ValueError, match="restarts by a command"):
            impl.restart_role(roles[1], while_down=lambda: None)
        impl.restart_role(roles[1])
        assert marker.read_text() == "yes"
    finally:
        assert impl.stop() == []


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """An HTTPS server with a self-signed certificate for 127.0.0.1 (openssl); records Authorization headers."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    seen: list[str] = []

    def answer(request: http.server.BaseHTTPRequestHandler) -> dict[str, list[object]]:
        seen.append(request.headers.get("Authorization", ""))
        return {"attachments": []}

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serving(answer, tls=context) as port:
        yield f"https://127.0.0.1:{port}", cert, seen


def test_https_endpoint_with_its_own_ca_and_token(tls_server: tuple[str, Path, list[str]], tmp_path: Path) -> None:
    base, cert, seen = tls_server
    url = f"{base}/v1/attachments"
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        endpoints.urlopen(url, timeout=5)
    impl = _impl(tmp_path, fabricProbe={"url": url, "caFile": str(cert), "token": "t0k"})
    impl.start()
    try:
        with endpoints.urlopen(url, timeout=5) as response:
            assert json.load(response) == {"attachments": []}
        assert seen == ["Bearer t0k"]
    finally:
        impl.stop()
    with pytest.raises(urllib.error.URLError):
        endpoints.urlopen(url, timeout=5)  # unregistered at stop


# A server on the port given as argv[1], answering /healthz with its pid.
PORT_SERVER = (
    "import http.server, os, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self): self.send_response(200); self.end_headers(); self.wfile.write(str(os.getpid()).encode())\n"
    "    def log_message(self, *a): pass\n"
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
)


def test_a_restarted_process_comes_back_on_the_port_the_others_hold(tmp_path: Path) -> None:
    """{port} is picked once per run: after a restart the process listens where {url:NAME} (resolved into the
    other processes' commands at their start) still points."""
    impl = _impl(
        tmp_path,
        processes=[
            {"name": "fm", "command": [PY, "-c", PORT_SERVER, "{port}"], "ready": {"http": "/healthz"}},
            {"name": "ctl", "command": [PY, "-c", f"print('ready', flush=True); {SLEEP}", "{url:fm}"],
             "ready": {"log": "ready"}},
        ],
    )  # fmt: skip
    impl.start()
    try:
        held = impl.resolve("{url:fm}")
        first = urllib.request.urlopen(held + "/healthz", timeout=5).read().decode()
        new_pid = impl.restart("fm")
        assert impl.resolve("{url:fm}") == held
        assert urllib.request.urlopen(held + "/healthz", timeout=5).read().decode() == str(new_pid) != first
    finally:
        assert impl.stop() == []


def test_port_placeholders_stand_only_in_a_process(tmp_path: Path) -> None:
    impl = _impl(tmp_path)
    with pytest.raises(ProfileError, match="only in a process"):
        impl.resolve("{port}")
    with pytest.raises(ProfileError, match="takes no argument"):
        impl.resolve("{kubeconfig:x}")


def test_while_down_runs_between_the_kill_and_the_start_and_the_process_comes_back_anyway(tmp_path: Path) -> None:
    """IMP-8's before-attach step creates its pod while the role is down (restart_role's while_down)."""
    impl = _impl(
        tmp_path,
        processes=[
            {"name": "p", "command": [PY, "-c", f"print('ready', flush=True); {SLEEP}"], "ready": {"log": "ready"}}
        ],
    )
    impl.start()
    try:
        old = impl.running[0].proc
        seen: list[object] = []
        impl.restart("p", lambda: seen.append(old.poll()))
        assert seen == [-9] and impl.running[0].proc.poll() is None  # killed (SIGKILL) when it ran; back after

        def fails() -> None:
            raise RuntimeError("while down")

        with pytest.raises(RuntimeError, match="while down"):
            impl.restart("p", fails)
        assert [r.spec.name for r in impl.running] == ["p"] and impl.running[0].proc.poll() is None
    finally:
        assert impl.stop() == []
