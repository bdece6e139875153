"""Run the go command for the builder: environment, toolchain choice, streamed progress, clear failures."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from conformance.cluster.toolchain.gomod import version_tuple

Progress = Callable[[str], None]

# The one newer toolchain the module proxy serves here; used only when a module needs a newer Go.
NEWER_TOOLCHAIN = os.environ.get("DRA_CONFORMANCE_GOTOOLCHAIN", "go1.27.3")
PROGRESS_EVERY_S = 15.0


class BuildError(RuntimeError):
    """A binary could not be built; the message names it and carries the go command's last words."""


def local_go_version() -> str:
    go = shutil.which("go")
    if not go:
        raise BuildError("the go command is not on PATH: install Go 1.26+ to build the control plane")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()
    return out.removeprefix("go")


def go_env(required_go: str) -> dict[str, str]:
    """Environment of a static, upstream-like build; picks the newer toolchain only when a module needs it."""
    env = dict(os.environ, CGO_ENABLED="0", GOWORK="off", GOFLAGS="-buildvcs=false -mod=mod")
    if env.get("GOTOOLCHAIN", "") in ("", "auto", "local"):
        local = local_go_version()
        env["GOTOOLCHAIN"] = NEWER_TOOLCHAIN if version_tuple(required_go) > version_tuple(local) else "local"
    return env


@contextlib.contextmanager
def _go(args: list[str], cwd: Path, env: dict[str, str], stderr: int = subprocess.PIPE) -> Iterator[subprocess.Popen]:
    """A go command in a process group of its own, killed with everything it started (compilers, linkers, a
    toolchain download) if the caller stops early: an interrupted build leaves nothing running."""
    proc = subprocess.Popen(
        ["go", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def toolchain_choice(required_go: str, env: dict[str, str]) -> str:
    """Which toolchain a build runs with and why, for the build log."""
    chosen = env["GOTOOLCHAIN"]
    if chosen == "local":
        return f"this machine's go {local_go_version()}"
    if chosen == NEWER_TOOLCHAIN and version_tuple(required_go) > version_tuple(local_go_version()):
        return (
            f"this machine's go {local_go_version()} is older, so GOTOOLCHAIN={chosen} "
            "(fetched by the go command from the module proxy; DRA_CONFORMANCE_GOTOOLCHAIN overrides)"
        )
    return f"GOTOOLCHAIN={chosen} from the environment"


def go_json(args: list[str], cwd: Path, env: dict[str, str], what: str) -> list[dict]:
    """Run a go command that prints a stream of JSON objects (e.g. `go mod download -json`)."""
    with _go(args, cwd, env) as proc:
        stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise BuildError(f"{what}: `go {' '.join(args)}` failed:\n{_tail(stderr + stdout)}")
    decoder, text, objects, index = json.JSONDecoder(), stdout, [], 0
    while (index := _skip_space(text, index)) < len(text):
        obj, index = decoder.raw_decode(text, index)
        objects.append(obj)
    for obj in objects:
        if obj.get("Error"):
            raise BuildError(f"{what}: {obj['Error']}")
    return objects


def go_run(args: list[str], cwd: Path, env: dict[str, str], what: str, progress: Progress) -> float:
    """Run a go command, reporting how many packages it compiled every few seconds; returns seconds taken.

    `go build -v` prints one line per package it compiles, which is the only progress the go command has.
    """
    started = last_report = time.monotonic()
    lines: deque[str] = deque(maxlen=40)
    with _go(args, cwd, env, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        for count, line in enumerate(proc.stdout, start=1):
            lines.append(line.rstrip())
            now = time.monotonic()
            if now - last_report >= PROGRESS_EVERY_S:
                progress(f"  {what}: {count} packages so far, {now - started:.0f}s")
                last_report = now
        proc.wait()
    if proc.returncode != 0:
        raise BuildError(f"{what}: `go {' '.join(args[:2])} ...` failed (exit {proc.returncode}):\n" + "\n".join(lines))
    return time.monotonic() - started


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
