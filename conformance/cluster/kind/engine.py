"""A Docker engine for kind: the one already running, else Debian's docker.io started by the suite (and stopped by its
last user: runs sharing it hold leases, engine_users.py).

On a machine with a normal Docker nothing here is done. Where none answers, the suite installs Debian's docker.io,
debootstrap and iptables (apt, --no-install-recommends) and starts dockerd itself (no init system): overlay2,
iptables on. Where the process's bounding set lacks capabilities Docker grants a privileged container (this VM has
no CAP_SYS_RESOURCE: runc then fails "unable to apply caps: operation not permitted", and kind's nodes are
privileged), dockerd's default runtime is a runc wrapper that drops those capabilities from the container's spec.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conformance.cluster.kind.engine_users import EngineUsers, process_start
from conformance.cluster.kind.tools import docker_problem
from conformance.cluster.toolchain.cache import default_cache_root
from conformance.cluster.waits import wait_for

Progress = Callable[[str], None]
PACKAGES = ("docker.io", "debootstrap", "iptables")
# "never": only use a running engine (tests of the refusals; machines where the suite must not install anything).
START_ENV = "DRA_CONFORMANCE_START_DOCKERD"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
RUNTIME = "dra-conformance-runc"
# Linux capability numbers (include/uapi/linux/capability.h), for the names Docker writes into a container's spec.
CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]

# Called by dockerd (containerd-shim) as runc: drops capabilities from the bundle's config.json (create, run) or
# the --process file (exec), then hands over to the real runc with the same arguments.
_WRAPPER = """#!/usr/bin/python3
import json, os, sys
DROP = set({drop!r})
REAL = {real!r}

def strip(path):
    with open(path) as f:
        spec = json.load(f)
    caps = (spec.get("process", spec) or {{}}).get("capabilities") or {{}}
    for key, names in caps.items():
        caps[key] = [n for n in names or [] if n not in DROP]
    with open(path, "w") as f:
        json.dump(spec, f)

args = sys.argv[1:]
for i, arg in enumerate(args):
    if arg in ("create", "run"):
        bundle = "."
        for j, opt in enumerate(args[i + 1:], start=i + 1):
            if opt in ("--bundle", "-b") and j + 1 < len(args):
                bundle = args[j + 1]
            elif opt.startswith("--bundle="):
                bundle = opt.split("=", 1)[1]
        strip(os.path.join(bundle, "config.json"))
        break
    if arg == "exec":
        for j, opt in enumerate(args[i + 1:], start=i + 1):
            if opt in ("--process", "-p") and j + 1 < len(args):
                strip(args[j + 1])
            elif opt.startswith("--process="):
                strip(opt.split("=", 1)[1])
        break
os.execv(REAL, [REAL] + args)
"""


def missing_capabilities() -> list[str]:
    """CAP_ names absent from this process's bounding set (Docker grants them all to --privileged containers)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            bounding = int(line.split()[1], 16)
            return [f"CAP_{name}" for bit, name in enumerate(CAPABILITIES) if not bounding >> bit & 1]
    return []


@dataclass
class Engine:
    """The engine kind talks to. `lease` is set when it is a dockerd the suite started (this run or another): this run
    is one of its users, and stop() stops it only when no other user is left. `process`: this run started it."""

    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    progress: Progress = print
    users: EngineUsers | None = None
    lease: str | None = None
    pid: int | None = None  # the suite-started dockerd's pid

    @property
    def started_here(self) -> bool:
        """The suite started this dockerd (this run or another that shares it): it is stopped by its last user."""
        return self.lease is not None

    def keep(self) -> str:
        """Leave dockerd running past this run (a kept cluster): the lease stays until removed by hand."""
        assert self.users is not None and self.lease is not None
        with self.users.lock():
            kept = self.users.keep(self.lease)
        self.lease = None
        return f"pid {self.pid}; once the cluster is deleted: rm {kept} && kill {self.pid}"

    def stop(self) -> None:
        if self.lease is None or self.users is None:
            return
        lease, self.lease = self.lease, None
        with self.users.lock():
            others = self.users.leave(lease)
            if others:
                self.progress(
                    f"leaving the dockerd the suite started (pid {self.pid}) running: {len(others)} other user(s) "
                    f"hold a lease ({', '.join(others)})"
                )
                return
            if self.users.started_dockerd() != self.pid:
                return  # gone already (stopped by hand, crashed)
            who = "this run" if self.process is not None else "an earlier run"
            self.progress(f"stopping the dockerd {who} started (pid {self.pid}): no other user is left")
            _terminate(self.pid, self.process)
            self.users.forget_dockerd()


def _terminate(pid: int | None, process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL to its process group after STOP_TIMEOUT_S; waits for the end (reaps our own child)."""
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if process is not None:
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            process.wait()
        return
    try:
        _wait_gone(pid, STOP_TIMEOUT_S)
    except AssertionError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        _wait_gone(pid, 10.0)


def _wait_gone(pid: int, timeout: float) -> None:
    wait_for(
        lambda: process_start(pid),
        lambda start: start is None,
        timeout=timeout,
        expected=f"dockerd (pid {pid}) to exit",
    )


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def install_packages(progress: Progress = _print, packages: tuple[str, ...] = PACKAGES) -> None:
    """apt-get install what is missing of `packages` (Debian and its derivatives; needs root)."""
    missing = [p for p in packages if not _installed(p)]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise EngineError(f"{', '.join(missing)} missing: install them (Debian: apt-get install {' '.join(missing)})")
    progress(f"installing {', '.join(missing)} (apt-get, --no-install-recommends)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise EngineError(f"`{' '.join(cmd)}` failed:\n{(proc.stdout + proc.stderr)[-2000:]}")


def _installed(package: str) -> bool:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return proc.returncode == 0 and "install ok installed" in proc.stdout


class EngineError(RuntimeError):
    """No Docker engine, and none could be started here."""


def dockerd_command(state: Path) -> list[str]:
    return ["dockerd", "--storage-driver", "overlay2", "--iptables=true", "--pidfile", str(state / "dockerd.pid")]


def ensure_engine(progress: Progress = _print, state: Path | None = None) -> Engine:
    """The running engine (nothing done; a lease on it if the suite started it), else a dockerd started now with this
    run's lease. Engine.stop leaves; the last user stops a suite-started dockerd."""
    state = state or default_cache_root() / "docker"
    users = EngineUsers(state)
    with users.lock():
        shared = users.started_dockerd()
        if shared is not None:  # a suite-started dockerd (maybe still coming up, or left by a crashed run)
            if (problem := docker_problem()) is not None:
                if shutil.which("docker") is None or os.environ.get(START_ENV) == "never":
                    raise EngineError(problem)  # no client to talk to it; or told to use only an answering engine
                _wait_answering(lambda: None, state / "dockerd.log")
            progress(f"using the dockerd the suite started earlier (pid {shared}), with a lease")
            return Engine(log=state / "dockerd.log", progress=progress, users=users, lease=users.join(), pid=shared)
        if (problem := docker_problem()) is None:
            return Engine(progress=progress)
        if not sys.platform.startswith("linux") or os.environ.get(START_ENV) == "never":
            raise EngineError(problem)
        install_packages(progress)
        state.mkdir(parents=True, exist_ok=True)
        cmd = dockerd_command(state)
        if drop := missing_capabilities():
            wrapper = state / "runc-wrapper"
            real = shutil.which("runc") or "/usr/sbin/runc"
            wrapper.write_text(_WRAPPER.format(drop=sorted(drop), real=real))
            wrapper.chmod(0o755)
            cmd += ["--add-runtime", f"{RUNTIME}={wrapper}", "--default-runtime", RUNTIME]
            progress(f"no {', '.join(drop)} here: containers run through {wrapper}, which drops them")
        log = state / "dockerd.log"
        progress(f"no Docker engine answers: starting dockerd (log {log})")
        with log.open("ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
        users.record_dockerd(proc.pid)
        engine = Engine(proc, log, progress, users, users.join(), proc.pid)
    try:
        _wait_answering(proc.poll, log)
    except BaseException:
        engine.stop()
        raise
    if proc.poll() is not None:
        engine.stop()
        raise EngineError(f"dockerd exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
    return engine


def _wait_answering(exited: Callable[[], int | None], log: Path) -> None:
    wait_for(
        lambda: (exited(), docker_problem()),
        lambda seen: seen[0] is not None or seen[1] is None,
        timeout=START_TIMEOUT_S,
        expected="dockerd to answer `docker info`",
        describe=lambda seen: f"(exit status, problem) = {seen}; log {log}",
    )
