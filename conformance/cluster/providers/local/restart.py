"""Restart one control-plane component of a running local cluster in place: the same etcd, certificates, ports and
folder, with other feature gates, another release's binary or another kube-scheduler configuration. What
`dra-conformance lifecycle` needs to switch DRADeviceBindingConditions on a live cluster, to upgrade and downgrade on
one etcd, and to run kube-scheduler one minor older than kube-apiserver.

The command line starts as kwokctl wrote it (its kwok.yaml, as the start-up revival reads it); each restart edits it
and keeps the edited line, so the next restart of that component starts from what runs now. The old process gets
SIGTERM (SIGKILL after STOP_GRACE_S); the new one is detached like kwokctl's own, its pid in kwokctl's pid file, so
`kwokctl delete cluster` and the leftover sweep find it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from conformance.cluster.providers.base import ProviderNotReady
from conformance.cluster.providers.local.processes import _running

STOP_GRACE_S = 10.0
RESTARTABLE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


@dataclass(frozen=True)
class CommandLine:
    """One component's binary and arguments (`--name=value` each, as kwokctl writes them)."""

    name: str
    binary: str
    args: tuple[str, ...]
    work_dir: str | None = None

    def flag(self, flag: str) -> str | None:
        """The value of `--flag`, None when absent."""
        for i, arg in enumerate(self.args):
            if arg == f"--{flag}" and i + 1 < len(self.args):
                return self.args[i + 1]
            if arg.startswith(f"--{flag}="):
                return arg.split("=", 1)[1]
        return None

    def with_flag(self, flag: str, value: str | None) -> CommandLine:
        """The line with `--flag` set to `value` (replaced where present, else added), or removed (None)."""
        args: list[str] = []
        skip = False
        for i, arg in enumerate(self.args):
            if skip:
                skip = False
                continue
            if arg == f"--{flag}":
                skip = i + 1 < len(self.args) and not self.args[i + 1].startswith("--")
                continue
            if not arg.startswith(f"--{flag}="):
                args.append(arg)
        if value is not None:
            args.append(f"--{flag}={value}")
        return replace(self, args=tuple(args))

    def with_binary(self, binary: Path | str) -> CommandLine:
        return replace(self, binary=str(binary))


def kwokctl_lines(state: Path) -> dict[str, CommandLine]:
    """Every component's command line as kwokctl started it (its state folder's kwok.yaml)."""
    config = next(
        d
        for d in yaml.safe_load_all((state / "kwok.yaml").read_text())
        if d and d.get("kind") == "KwokctlConfiguration"
    )
    return {
        c["name"]: CommandLine(c["name"], c["binary"], tuple(c.get("args") or ()), c.get("workDir"))
        for c in config["components"]
    }


def stop_pid(pid: int, grace: float = STOP_GRACE_S) -> bool:
    """SIGTERM, then SIGKILL after `grace`; True if the process had to be killed. A zombie counts as gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _running(pid):
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _running(pid):
                time.sleep(0.05)
            return True
        time.sleep(0.05)
    return False


@dataclass
class Restarter:
    """Restarts the components of one local cluster (its kwokctl state folder), keeping their current lines."""

    state: Path
    lines: dict[str, CommandLine]
    children: list[subprocess.Popen[bytes]]

    @classmethod
    def of(cls, state: Path, children: list[subprocess.Popen[bytes]]) -> Restarter:
        return cls(state, kwokctl_lines(state), children)

    def restart(
        self, name: str, edit: Callable[[CommandLine], CommandLine], ready: Callable[[], None], why: str
    ) -> CommandLine:
        """Stop `name`, start it with `edit(its current line)`, then `ready()` (which waits, failing with what it
        saw); on a start that exits at once, raise with the last lines of its log. Returns the line it runs."""
        if name not in RESTARTABLE:
            raise ValueError(f"{name} is not one of the restartable components {RESTARTABLE}")
        line = edit(self.lines[name])
        pidfile = self.state / "pids" / f"{name}.pid"
        old = pidfile.read_text().strip()
        if old.isdigit():
            stop_pid(int(old))
        for child in self.children:  # a component this process started before: reap it
            if child.poll() is not None:
                continue
            if str(child.pid) == old:
                child.wait()
        log = self.state / "logs" / f"{name}.log"
        with log.open("a") as out:
            out.write(f"\n--- restarted by dra-conformance: {why} ---\n{line.binary} {' '.join(line.args)}\n")
            out.flush()
            proc = subprocess.Popen(
                [line.binary, *line.args],
                cwd=line.work_dir,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # detached like kwokctl's own: `kwokctl delete` finds it by its pid file
            )
        pidfile.write_text(str(proc.pid))
        self.children.append(proc)
        self.lines[name] = line
        try:
            ready()
        except BaseException as exc:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-12:])
            state = "exited" if proc.poll() is not None else "is not ready"
            raise ProviderNotReady(
                f"{name} {state} after its restart ({why}): {str(exc).splitlines()[0]}; last lines of {log}:\n{tail}"
            ) from exc
        return line


READY_AFTER_RESTART_S = 90.0  # a restarted kube-apiserver reads every object from etcd again; loaded machine


def wait_component_ready(name: str, kubeconfig_cluster: Callable[[], str], ports: dict[str, int]) -> None:
    """Wait until the restarted component says it is ready: kube-apiserver's /readyz through the API (with the
    cluster's credentials: `kubeconfig_cluster` reads it), kube-scheduler's /readyz, kube-controller-manager's
    /healthz on their secure ports."""
    from conformance.cluster.readiness import https_get
    from conformance.cluster.waits import wait_for

    if name == "kube-apiserver":
        observe, expected = kubeconfig_cluster, "kube-apiserver /readyz"
    elif name == "kube-scheduler":
        url = f"https://127.0.0.1:{ports['kubeSchedulerPort']}/readyz"
        observe, expected = (lambda: https_get(url)), f"kube-scheduler {url}"
    else:
        url = f"https://127.0.0.1:{ports['kubeControllerManagerPort']}/healthz"
        observe, expected = (lambda: https_get(url)), f"kube-controller-manager {url}"
    wait_for(
        observe,
        lambda body: body.strip() == "ok",
        timeout=READY_AFTER_RESTART_S,
        expected=expected,
        describe=lambda body: (body or "")[-300:],
        interval=0.1,
        max_interval=0.5,
    )
