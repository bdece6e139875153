"""Why a control-plane component ended, read from the end of its log: the panic, fatal signal or fatal klog line it
printed, and the frame of its own code it panicked in. Shared by the local cluster's watchdog (its process logs) and
the static-pod watch of kind and existing clusters (the previous container's log, through the API)."""

from __future__ import annotations

import re

# klog's own lines, then Go's runtime: the first that says why the process ended.
_PANIC = re.compile(r"^(panic: .*|fatal error: .*)$")
_OBSERVED = re.compile(r'"Observed a panic" panic="([^"]*)"')
_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ (.*)$")
_FAILED = re.compile(r'"command failed" err="(.*)"')
_SIGNAL = re.compile(r"^(SIG[A-Z]+: .*)$")  # Go's own report of a fatal signal (SIGSEGV, SIGABRT), then its registers
_FRAME = re.compile(r"^\t?(\S+\(.*\))$")  # a function of a goroutine trace, its file:line on the next line


def crash_cause(log_tail: str) -> tuple[str, str]:
    """Why a component ended, from the end of its log: (the panic or fatal line, the frame it panicked in)."""
    lines = log_tail.splitlines()
    cause = ""
    for pattern in (_PANIC, _SIGNAL, _FATAL, _FAILED):
        found = [m.group(1) for line in lines if (m := pattern.match(line.strip()) or pattern.search(line))]
        if found:
            cause = found[-1] if pattern in (_FATAL, _FAILED) else found[0]
            break
    if not cause and (observed := [m.group(1) for line in lines if (m := _OBSERVED.search(line))]):
        cause = f"panic: {observed[0]}"
    if not cause:  # e.g. killed from outside (SIGKILL): nothing of its own to say
        last = next((line.strip() for line in reversed(lines) if line.strip()), "")
        cause = f"no panic or fatal line in its log (killed from outside?); its last line: {last[:200]}"
    return cause[:300], _panicking_frame(lines)


def _panicking_frame(lines: list[str]) -> str:
    """The first frame after the runtime's `panic(...)` in a goroutine trace: where the component's own code failed."""
    for i, line in enumerate(lines):
        if not line.strip().startswith("panic("):
            continue
        for j in range(i + 1, min(i + 12, len(lines) - 1)):
            frame = lines[j].strip()
            if frame.startswith("runtime/") or not _FRAME.match(frame):
                continue
            where = lines[j + 1].strip().split(" +")[0]
            return f"{frame.rsplit('(', 1)[0]} ({where.rsplit('/', 1)[-1]})"  # the function, not its arguments
    return ""
