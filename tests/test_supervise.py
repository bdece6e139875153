"""`dra-conformance implementation up` supervises a profile's processes like a Deployment: state folder (env, pid
files), a process that exits is started again, `implementation restart` kills one and returns once it is back, and
SIGTERM stops everything cleanly. Real subprocesses (the CLI and a small HTTP server with a port file); no cluster
(the profile applies no manifests, so the kubeconfig is never read)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conformance.cluster.waits import wait_for
from conformance.implementation.profile import API_VERSION, KIND
from conformance.implementation.supervise import read_env, start_in_background

PY = sys.executable
CLI = str(Path(PY).parent / "dra-conformance")
# A server on a free port that writes the port to argv[1] and answers /healthz; a sleeper that prints "ready".
SERVER = (
    "import http.server, pathlib, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self): self.send_response(200); self.end_headers()\n"
    "    def log_message(self, *a): pass\n"
    "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
    "pathlib.Path(sys.argv[1]).write_text(str(s.server_port))\n"
    "s.serve_forever()\n"
)
WORKER = "import time; print('ready', flush=True); time.sleep(600)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (killed, not yet reaped by its parent) is not running any more
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": "t",
        "version": "1",
        "driver": "d.example.com",
        "processes": [
            {"name": "fabric-manager", "command": [PY, "-c", SERVER, "{port_file}"], "portFile": True,
             "ready": {"http": "/healthz"}},
            {"name": "worker", "command": [PY, "-c", WORKER, "{url:fabric-manager}"], "ready": {"log": "ready"}},
        ],
    }  # fmt: skip
    profile, kubeconfig, state = tmp_path / "p.yaml", tmp_path / "kubeconfig", tmp_path / "state"
    profile.write_text(yaml.safe_dump(doc))
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    log = tmp_path / "up.log"
    proc, _env = start_in_background(profile, kubeconfig, state, log, timeout=30)
    try:
        yield proc, state, log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def _pid(state: Path, name: str) -> int:
    return int((state / f"{name}.pid").read_text())


def test_state_folder_says_where_everything_is(supervised: tuple[subprocess.Popen[bytes], Path, Path]) -> None:
    _proc, state, _log = supervised
    env = read_env(state)
    assert env["DRA_CONFORMANCE_STATE"] == str(state.resolve())
    with urllib.request.urlopen(env["FABRIC_MANAGER_URL"] + "/healthz", timeout=5) as response:
        assert response.status == 200
    assert _alive(_pid(state, "fabric-manager")) and _alive(_pid(state, "worker"))


def test_a_process_that_exits_is_started_again(supervised: tuple[subprocess.Popen[bytes], Path, Path]) -> None:
    _proc, state, log = supervised
    old = _pid(state, "worker")
    os.kill(old, signal.SIGKILL)
    new = wait_for(lambda: _pid(state, "worker"), lambda p: p != old, timeout=30, expected="a new worker pid")
    assert _alive(new) and "worker exited with -9" in log.read_text()


def test_a_new_port_restarts_the_processes_that_hold_the_old_url(
    supervised: tuple[subprocess.Popen[bytes], Path, Path],
) -> None:
    _proc, state, log = supervised
    url = (state / "env").read_text()
    worker = _pid(state, "worker")
    os.kill(_pid(state, "fabric-manager"), signal.SIGKILL)
    wait_for(lambda: (state / "env").read_text(), lambda text: text != url, timeout=30, expected="a new env file")
    assert _pid(state, "worker") != worker and not _alive(worker), log.read_text()


def test_restart_command_returns_once_the_process_is_back(
    supervised: tuple[subprocess.Popen[bytes], Path, Path],
) -> None:
    _proc, state, _log = supervised
    old = _pid(state, "worker")
    done = subprocess.run(
        [CLI, "implementation", "restart", "--state", str(state), "worker"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    new = _pid(state, "worker")
    assert new != old and _alive(new) and f"running again as pid {new}" in done.stdout


def test_sigterm_stops_everything_and_clears_the_state(supervised: tuple[subprocess.Popen[bytes], Path, Path]) -> None:
    proc, state, log = supervised
    pids = [_pid(state, "fabric-manager"), _pid(state, "worker")]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, log.read_text()
    assert "stopped cleanly" in log.read_text()
    assert not any(_alive(p) for p in pids)
    assert not list(state.glob("*.pid")) and not (state / "env").exists()


def test_restart_without_a_watchdog_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [CLI, "implementation", "restart", "--state", str(tmp_path), "controller"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "is `implementation up` running?" in done.stderr
