"""The one place a failed scenario's message gets its first line: the cause, from the suite's own evidence, never the
symptom of the wait that ran out.

When a wait of a scenario runs out ("timed out after 60s waiting for the pod to be bound"), the runner hands the
message here (explain). The first line becomes what the evidence says, in this order:
1. the record: what happened to the scenario's claims (observe/story.py: allocated N times on node X, each cleared by
   the binding timeout after T s, conditions never written, who wrote status.devices last and when);
2. the API server's refusals of the stack's accounts in the scenario's window and namespaces (cluster/audit.py:
   "update resourceclaims/driver arbitrary-node refused 37 times for NS/NAME");
3. else the rights IMP-9 computes (a central writer lacking arbitrary-node:<verb>), where no audit log is readable;
4. else the first line the implementation logged about the scenario that says something went wrong.
The wait's symptom moves to the next line, then the evidence in full, then the implementation's log lines of the
scenario (by process, in its window). A message whose first line is not a wait's symptom keeps it (the scenario
already said its cause) and gets the same evidence after it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from conformance.cluster.audit import NOT_AVAILABLE, Refusal, audit_log, summarize
from conformance.implementation.harness.process import LOUD
from conformance.observe.story import lead, stories
from conformance.suite.ownpools import mentioned

if TYPE_CHECKING:
    from conformance.suite.context import ClusterContext

# The words of every wait that ran out (cluster/waits.py, cluster/readiness.py): what a first line must not be.
WAIT_SYMPTOM = re.compile(r"(?:timed out after|no progress for) [\d.]+s waiting for ")
NOTHING_OBSERVED = "last seen: nothing observed"
SYMPTOM_LABEL = "the wait that ran out: "


def is_wait_symptom(line: str) -> bool:
    """A first line that says only that a wait ran out (what a reader cannot act on)."""
    return WAIT_SYMPTOM.search(line) is not None or NOTHING_OBSERVED in line


@dataclass
class Evidence:
    """What the suite knows about a failed scenario, besides the wait's own message."""

    story: str = ""  # the record's lead claim (one line)
    stories: list[str] = field(default_factory=list)  # every claim of the scenario
    refusals: list[Refusal] = field(default_factory=list)
    audit: str = ""  # why the refusals are not known ("" where the audit log was read)
    rights: list[str] = field(default_factory=list)  # what IMP-9's rules find missing
    logged: str = ""  # the first loud line the implementation logged about the scenario
    logs: str = ""  # the implementation's log lines of the scenario, in full

    def cause(self) -> str:
        """The first line: the record's story and the strongest other evidence beside it."""
        other = ""
        if self.refusals:
            other = summarize(self.refusals, 1, short=True)[0]
        elif self.rights:
            other = self.rights[0]
        elif self.logged:
            other = f"the implementation logged: {self.logged}"
        return "; ".join(p for p in (self.story, other) if p)

    def details(self) -> list[str]:
        lines = []
        if len(self.stories) > 1 or (self.stories and self.stories[0] != self.story):
            lines += ["the record, claim by claim:", *(f"  {s}" for s in self.stories[:10])]
        if self.refusals:
            lines += ["the API server's refusals of the stack's accounts while it ran (audit log):"]
            lines += [f"  {s}" for s in summarize(self.refusals, 5)]
        elif self.audit:
            lines.append(self.audit)
        lines += [f"rights: {r}" for r in self.rights[1 if not self.refusals else 0 :]]
        if self.logs:
            lines.append(self.logs)
        return lines


@dataclass
class Dealings:
    """What the suite's evidence shows a stack did with other drivers' objects (IMP-17), strongest first: its writes
    to them (the objects' resourceVersions, status.devices and field managers: suite/others.py), its requests on them
    the API server refused (audit log), its log lines that name them."""

    writes: list[str] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # "[process] line", each naming one of `names` or `spaces`
    names: dict[str, str] = field(default_factory=dict)  # another driver's name or pool -> whose it is
    spaces: dict[str, str] = field(default_factory=dict)  # a namespace of other drivers' claims -> whose it is

    def about(self, line: str) -> list[str]:
        """The other drivers' names and namespaces `line` mentions (a namespace also as NS/claim)."""
        return mentioned([line], self.names) + [n for n in self.spaces if n in line]

    def cause(self) -> str:
        """One clause for a first line: what the implementation did with them ("" where the evidence shows nothing)."""
        if self.writes:
            more = f" (and {len(self.writes) - 1} more writes)" if len(self.writes) > 1 else ""
            return f"the implementation wrote another driver's objects: {self.writes[0]}{more}"
        if self.refusals:
            first = self.refusals[0]
            where = f"{first.namespace}/{first.name}" if first.namespace else first.name
            return (
                f"the implementation acted on another driver's objects and was refused: "
                f"{summarize(self.refusals, 1, short=True)[0]}, first on {where}"
            )
        if self.lines:
            line = next((x for x in self.lines if LOUD.search(x)), self.lines[0])
            named = self.about(line)[:1]  # the first a line names, whose in short (the details say the rest)
            whose = "".join(f" ({n}: {(self.names.get(n) or self.spaces[n]).split(' (')[0]})" for n in named)
            said = _STAMP.sub("", line.strip(), count=1)
            return f"the implementation logged about another driver's objects: {said[:300]}{whose}"
        return ""


_STAMP = re.compile(r"(?<=\] )\d{4}-\d\d-\d\d[ T][\d:.,]+Z?\s+")  # a log line's own time: the details keep it
NO_DEALINGS = "nothing the implementation wrote, was refused or logged names another driver's objects"


def gather(
    ctx: ClusterContext, since: float, until: float | None = None, namespaces: set[str] | None = None
) -> Evidence:
    """The evidence of scenario `ctx` in its window (since its start), of its namespaces or those given (a part of
    it): never a reason for a second failure."""
    until = until or time.time()
    found = Evidence()
    timeout = ctx.cluster.info.binding_timeout_s
    namespaces = set(ctx.namespaces) if namespaces is None else namespaces
    told = stories(ctx.record, namespaces, timeout)
    found.story, found.stories = lead(told), [s.text() for s in told]
    log = audit_log(ctx.cluster.info.audit_log)
    accounts = ctx.stack_accounts()
    if accounts is not None:  # an implementation scenario: its stack's refusals (any account's, if it names none)
        if log is None:
            found.audit = NOT_AVAILABLE
        elif not log.path.exists():
            found.audit = f"{NOT_AVAILABLE}: kube-apiserver wrote none at {log.path} (a cluster started elsewhere?)"
        else:
            found.refusals = log.refusals(since, until + 1, namespaces=namespaces, accounts=accounts or None)
    try:
        found.rights = ctx.rights_missing()
    except Exception as exc:  # evidence that cannot be read must not hide the failure
        found.audit += f" (the accounts' rights could not be computed: {exc!r})"
    try:
        found.logged, found.logs = ctx.scenario_logs(since)
    except Exception as exc:
        found.logs = f"(the implementation's log lines could not be read: {exc!r})"
    return found


def lead_with(message: str, evidence: Evidence) -> str:
    """`message` with the evidence's cause as its first line where that line is a wait's symptom (a prefix the
    scenario put before the symptom stays), the symptom on the next line, then the evidence in full."""
    first, _, rest = message.partition("\n")
    details = evidence.details()
    cause = evidence.cause()
    found = WAIT_SYMPTOM.search(first)
    if cause and (found or NOTHING_OBSERVED in first):
        start = found.start() if found else len(first)
        head = f"{first[:start]}{cause}"
        lines = [head, f"{SYMPTOM_LABEL}{first[start:]}" if found else first, *([rest] if rest else []), *details]
        return "\n".join(lines)
    return "\n".join([message, *details]) if details else message


def explain(ctx: ClusterContext, message: str, since: float) -> str:
    """The failed scenario's message, its cause first (the runner calls this for every AssertionError of a
    scenario)."""
    try:
        evidence = gather(ctx, since)
    except Exception as exc:  # a record or log that cannot be read must not hide the failure
        return f"{message}\n(the failure's evidence could not be read: {exc!r})"
    return lead_with(message, evidence)


def in_one_line(ctx: ClusterContext, message: str, since: float, namespaces: set[str]) -> str:
    """A wait a scenario caught and keeps as part of what it observed (a cell of a matrix, a round): its cause and
    its symptom in one line, for a message that quotes it among others ("the pod on node-1 did not bind: <this>")."""
    try:
        cause = gather(ctx, since, namespaces=namespaces).cause()
    except Exception as exc:  # evidence that cannot be read must not hide the failure
        cause = f"(its evidence could not be read: {exc!r})"
    first = message.partition("\n")[0]
    return f"{cause} ({SYMPTOM_LABEL}{first})" if cause and is_wait_symptom(first) else first
