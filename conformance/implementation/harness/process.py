"""Running the profile's commands: a process started with its environment and log and waited for until ready, a
hook or restart command run to completion, a process group signalled, and the processes' logs quoted."""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import subprocess
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from conformance.cluster.waits import wait_for
from conformance.implementation.harness.manifests import Manifests
from conformance.implementation.harness.resolve import port_key
from conformance.implementation.harness.state import ImplementationFailed, _Running, instance_name
from conformance.implementation.profile import Process

LOUD = re.compile(r"error|warn|exception|traceback|fail|abort|panic", re.IGNORECASE)
T = TypeVar("T")


class Processes(Manifests):
    """One process or one-shot command of the profile at a time, and what their logs say."""

    def _start(self, spec: Process, node: str | None = None) -> _Running:
        name = instance_name(spec.name, node)
        command = [self.resolve(arg, spec, node) for arg in spec.command]
        kubeconfig = self.resolve(spec.kubeconfig, spec, node)
        env = dict(os.environ, PYTHONUNBUFFERED="1", KUBECONFIG=kubeconfig)
        if spec.home:  # for a process that reads only $HOME/.kube/config
            home = self.workdir / f"home-{name}"
            (home / ".kube").mkdir(parents=True, exist_ok=True)
            (home / ".kube" / "config").write_bytes(Path(kubeconfig).read_bytes())
            env["HOME"] = str(home)
        env.update({key: self.resolve(value, spec, node) for key, value in spec.env.items()})
        log = self.workdir / f"{name}.log"
        self._port_file(name).unlink(missing_ok=True)
        with log.open("wb") as out:
            try:
                proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                raise ImplementationFailed(f"{name}: cannot run {command[0]}: {exc.strerror}") from None
        run = _Running(spec, proc, log, node=node)
        self.running = [*self.running, run]  # copy-on-write: other threads iterate it
        if spec.fixed_port and not spec.port_file:
            run.port = self._port(name)
        if spec.port_file:
            run.port = int(
                self._wait(
                    run,
                    lambda: self._port_file(name).read_text().strip(),
                    str.isdigit,
                    "its port file",
                    spec.ready.timeout_s if spec.ready else 30.0,
                )
            )
        named = {port: self._port(port_key(name, port)) for port in spec.named_ports}
        if spec.ready and spec.ready.http:
            ca = str(self.ca.ensure_ca()) if spec.tls else spec.ready.ca_file and self.resolve(spec.ready.ca_file)
            asked = named[spec.ready.port] if spec.ready.port else run.port
            url = f"{'https' if ca else 'http'}://127.0.0.1:{asked}{spec.ready.http}"
            context = ssl.create_default_context(cafile=ca) if ca else None
            self._wait(
                run,
                lambda: urllib.request.urlopen(url, timeout=5, context=context).status,
                lambda s: 200 <= s < 300,
                f"GET {url} to answer 2xx",
                spec.ready.timeout_s,
            )
        elif spec.ready and spec.ready.log:
            pattern = re.compile(spec.ready.log)
            self._wait(
                run,
                lambda: run.log.read_text(errors="replace"),
                lambda t: bool(pattern.search(t)),
                f"a line matching {spec.ready.log!r} in {log}",
                spec.ready.timeout_s,
            )
        ports = [f"port {run.port}"] if run.port else []
        ports += [f"port {port} {number}" for port, number in named.items()]
        self.progress(f"started {name} (pid {', '.join([str(proc.pid), *ports])})")
        return run

    def _wait(
        self, run: _Running, observe: Callable[[], T], done: Callable[[T], bool], expected: str, timeout: float
    ) -> T:
        def checked() -> T:  # a process that died fails at once, with its output
            if run.proc.poll() is not None:
                raise ImplementationFailed(
                    f"{run.name} exited with {run.proc.returncode} during start-up; "
                    f"last lines of {run.log}:\n{run.tail()}"
                )
            return observe()

        return wait_for(
            checked,
            done,
            timeout=timeout,
            expected=f"{run.name}: {expected}",
            describe=lambda _seen: f"last lines of {run.log}:\n{run.tail()}",
            # local and cheap to check (a file, a loopback GET): the default back-off to 2 s would add up to 2 s
            # to each process's start, one after another
            interval=0.1,
            max_interval=0.25,
        )

    def _run_once(
        self, name: str, command: list[str], env: dict[str, str], timeout: float, phase: str, node: str | None = None
    ) -> None:
        """A hook or a restart command: run to completion, its output in the run's logs; fails on non-zero exit."""
        argv = [self.resolve(arg, node=node) for arg in command]
        full_env = dict(
            os.environ, KUBECONFIG=str(self.kubeconfig), **{k: self.resolve(v, node=node) for k, v in env.items()}
        )
        log = self.workdir / f"{phase}-{name}.log"
        self.progress(f"{phase} {name}: {' '.join(argv)}")
        with log.open("ab") as out:
            try:
                done = subprocess.run(argv, env=full_env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
            except OSError as exc:
                raise ImplementationFailed(f"{phase} {name}: cannot run {argv[0]}: {exc.strerror}") from None
            except subprocess.TimeoutExpired:
                raise ImplementationFailed(f"{phase} {name}: still running after {timeout:g}s (see {log})") from None
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise ImplementationFailed(f"{phase} {name} exited with {done.returncode}; last lines of {log}:\n{tail}")

    def log_marks(self) -> dict[str, int]:
        """Where each running process's log ends now (bytes), to quote what it writes from here on (log_since)."""
        return {r.spec.name: r.log.stat().st_size if r.log.exists() else 0 for r in self.running}

    def log_since(
        self, marks: dict[str, int], mention: Iterable[str] = (), avoid: Iterable[str] = (), lines: int = 10
    ) -> dict[str, list[str]]:
        """Per process, the lines its log got since `marks` (a scenario's window; a restarted process's new log from
        its start) that are about the scenario: those naming one of `mention` (its namespaces, claims, devices), and
        those that say error, warning, exception, failed or abort naming none of `avoid` (the other scenarios'
        namespaces): the last `lines` of each kind, in the order written."""
        named, others = [m for m in mention if m], [a for a in avoid if a]
        out: dict[str, list[str]] = {}
        for r in self.running:
            if not r.log.exists():
                continue
            data = r.log.read_bytes()
            mark = marks.get(r.spec.name, 0)
            first_new = data[: mark if mark <= len(data) else 0].count(b"\n")
            text = data.decode(errors="replace").splitlines()
            window = range(first_new, len(text))
            about = [i for i in window if any(m in text[i] for m in named)][-lines:]
            loud = [i for i in window if LOUD.search(text[i]) and not any(a in text[i] for a in others)][-lines:]
            picked = sorted({*about, *loud})  # in the order written
            if picked:
                out[r.spec.name] = [text[i] for i in picked]
        return out


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the process and its children (each process runs in a session of its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
