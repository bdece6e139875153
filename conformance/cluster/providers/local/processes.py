"""A local cluster's folder and processes: run kwokctl in it, delete a cluster, and find and kill whatever of it
survives."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conformance.cluster.providers.base import ProviderNotReady

DELETE_TIMEOUT_S = 30.0
GONE_GRACE_S = 2.0


def clusters_root() -> Path:
    return Path(tempfile.gettempdir()) / "dra-conformance-clusters"


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def leftover_processes(marker: str) -> list[tuple[int, str]]:
    """Processes whose command line mentions `marker` (a cluster's own folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append((int(proc.name), cmd.strip()))
    return found


def _running(pid: int) -> bool:
    """True for a live process; a zombie (exited, not yet reaped by kwokctl) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kwokctl_of(workdir: Path) -> Path | None:
    link = workdir / "kwokctl"
    return link.resolve() if link.exists() else None


def _env(workdir: Path) -> dict[str, str]:
    # KWOK_WORKDIR keeps all cluster state (pids, certs, logs) inside the cluster's own folder.
    return dict(os.environ, KWOK_WORKDIR=str(workdir / "kwok"))


def run_kwokctl(kwokctl: Path, workdir: Path, name: str, *args: str, timeout: float = 300) -> str:
    cmd = [str(kwokctl), "--name", name, *args]
    proc = subprocess.run(cmd, env=_env(workdir), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ProviderNotReady(
            f"`kwokctl {' '.join(args[:3])}` failed (exit {proc.returncode}):\n"
            f"{proc.stderr.strip()[-4000:]}\nlogs: {workdir / 'kwok'}"
        )
    return proc.stdout


def delete_cluster(name: str, workdir: Path, kwokctl: Path | None, *, keep_folder: bool = False) -> None:
    """Delete a cluster and its folder; kill anything of it that survives (never leave processes behind).

    keep_folder keeps the suite's own files (configs) and removes only kwokctl's state, for a retry. No wait here
    goes through wait_for: this runs after an interrupt too, when every wait_for stops at once.
    """
    if kwokctl is not None and (workdir / "kwok").exists():
        try:
            run_kwokctl(kwokctl, workdir, name, "delete", "cluster", timeout=DELETE_TIMEOUT_S)
        except (ProviderNotReady, subprocess.TimeoutExpired) as exc:
            _print(f"warning: kwokctl delete of {name} failed, killing its processes: {exc}")
    # kwokctl SIGKILLs the components; one may still be exiting for a moment (seen as leftover, then gone).
    survivors = _until_gone(str(workdir), GONE_GRACE_S)
    for pid, cmd in survivors:
        _print(f"warning: killing leftover process {pid} of cluster {name}: {cmd[:120]}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if survivors:
        _until_gone(str(workdir), GONE_GRACE_S)
    shutil.rmtree(workdir / "kwok" if keep_folder else workdir, ignore_errors=True)


def _until_gone(marker: str, grace: float) -> list[tuple[int, str]]:
    """Live (not zombie) processes of `marker` still there after up to `grace` seconds."""
    deadline = time.monotonic() + grace
    while True:
        alive = [(pid, cmd) for pid, cmd in leftover_processes(marker) if _running(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)
