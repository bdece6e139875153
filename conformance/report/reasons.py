"""A failure's reason as a reviewer needs it: the assertion's message and its evidence, not "file:line: Error".

The exception is read where pytest builds the report (call.excinfo), with its chain: a scenario whose wait ran out
is reported as the invariant violations seen meanwhile, "and then" the wait's own message with what it saw last.
"""

from __future__ import annotations

from typing import Any

MAX_REASON_CHARS = 8000  # a reason longer than this keeps its head and tail, saying how much was cut
_INTERNAL = ("Failed", "Skipped", "OutcomeException")


def _bounded(text: str, limit: int = MAX_REASON_CHARS) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-limit // 4 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def exception_reason(exc: BaseException) -> str:
    """Type and message of an exception and of the exceptions it was raised from, most relevant first."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        message = str(current).strip()
        if name in _INTERNAL:  # pytest.fail(...): the message is all there is
            parts.append(message or name)
        else:
            parts.append(f"{name}: {message}" if message else name)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if current is not None and str(current).strip() and str(current).strip() in "\n".join(parts):
            break  # "and then: <cause>" is in the message already
    return _bounded("\ncaused by: ".join(parts))


def report_reason(report: Any, excinfo: Any | None = None) -> str:
    """The reason of a pytest report: the exception's message when there is one, else pytest's crash line, else the
    last lines of its long representation (never only "file:line: AssertionError")."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if excinfo is not None:
        return exception_reason(excinfo.value)
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return _bounded(f"{crash.message}\n(at {crash.path}:{crash.lineno})")
    lines = [line for line in str(report.longreprtext).strip().splitlines() if line.strip()]
    return _bounded("\n".join(lines[-20:])) if lines else report.outcome


FIRST_LINE_CHARS = 500  # the first line every channel shows (terminal, JUnit, HTML) is cut here, the same for all


def headline(reason: str, limit: int = FIRST_LINE_CHARS) -> str:
    """The first line of a reason: THE one function that composes what the terminal, both JUnit files and the HTML
    report show first for a failure or skip (the first non-empty line; one ending in ":" with the line after it)."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if first.endswith(":") and len(lines) > 1:  # "invariants broken while it ran:" says nothing without its list
        first = f"{first} {lines[1]}"
    return first if len(first) <= limit else first[: limit - 3] + "..."
