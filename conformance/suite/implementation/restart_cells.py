"""IMP-8's restart matrix: the cells (the claim's state x the fabric's state of its device when a restarted role comes
back), which combinations are reachable and why the others are not, how the cells go in batches, and each cell's
outcome as judged — one place, read by the scenario (test_restart.py), its tests and the reports.

A cell is walked when the record shows, at the moment the role came back (a process role: right before its start;
a restart command: at its start), the claim in the cell's state and the fabric probe answering the cell's state for
the device. What each cell owes after the restart is the KEP's outcome: `bind` the pod binds on its node with every
device attached there, by an allowed path, and no condition True before THAT device was attached to the allocation's
node (a move: and the device leaves A before it is listed on B); `keep` the device stays attached while its pod uses
it; `report` (the failure path) the failure reported, the failed device out of offer from then on and never attached
again for that claim, the pod bound on the other device; every cell: once the pod and claim are gone, the devices are
detached and offered again within detachSeconds (the detach path's last step: and never attached again after it).
The cells themselves, the paths' steps and the grid's unreachable combinations: restart_grid.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.implementation.profile import Profile
from conformance.suite.implementation.outcome import Outcome
from conformance.suite.implementation.restart_grid import (  # noqa: F401 (re-exported: the matrix's one entry point)
    AT_KILL,
    BY_NAME,
    CELLS,
    PATHS,
    UNREACHABLE,
    Cell,
    Owed,
)
from conformance.suite.implementation.settle import LetGo

# Cells whose fabric step a process role's restart lets happen while the role is down (a held attach let go between
# kill and start); no cell of a role restarted by a command.
COMPLETED_WHILE_DOWN = ("allocated-attached",)


def not_staged(
    cell: Cell,
    *,
    command: bool,
    counted: bool,
    multi: bool,
    concurrency: int | None,
    second_node: bool,
    failures: bool = True,
) -> str:
    """Why the cell cannot be staged for this profile and role ("" : it can). `failures`: the profile claims
    attachFailureReporting (and does not declare it never reports one)."""
    if cell.failure and not failures:
        return "the profile does not claim attachFailureReporting: no failure path to restart on"
    if cell.failure and counted:
        return (
            "count-based entries name no device: whether THE failed device is out of offer (the step this path turns "
            "on) cannot be read from the slices (attach-failure judges a counted failure by the fabric and the claim's "
            "status data, IMP-4)"
        )
    if cell.down and command:
        return "the role restarts by a command, which kills and starts in one: nothing can happen while it is down"
    if cell.name in COMPLETED_WHILE_DOWN and command:
        return (
            "the attach must complete while the role is down: a command kills and starts in one, so only timing "
            "could place it there (on kind the attach was seen complete, its conditions written, before the command)"
        )
    if cell.move and counted:
        return (
            "count-based entries name no device: the device B's claim gets is the stack's choice, and the one leaving "
            "A is not free (IMP-19 walks a counted move without a restart)"
        )
    if cell.move and not second_node:
        return "no leased fabric device reaches a second node: nothing can move"
    if cell.multi and not multi:
        return "the profile does not claim multiDeviceClaims"
    if cell.multi and concurrency == 1:
        return "fabricConcurrency 1: the other attaches cannot run while one is held"
    return ""


def by_design(profile: Profile | None) -> list[str]:
    """The cells some restartable role of the profile can stage by the stack's design (the test ids of the matrix):
    no move where count entries name no device, no cell staged while a role is down where every role restarts by a
    command, no multi-device claim the profile does not claim, no failure path where it claims no failure reporting
    (nor on count-based entries). What a run then lacks (a second node, devices) skips
    the cell with why; what the design excludes is no cell of that profile (the report still lists it, not staged)."""
    if profile is None:
        return [c.name for c in CELLS]
    command = all(role.process is None for role in profile.restartable())
    multi = bool(profile.capabilities.get("multiDeviceClaims"))
    counted = profile.fabric_entries == "counted"
    failures = bool(profile.capabilities.get("attachFailureReporting")) and profile.promises.reports_failures
    kw = {"command": command, "counted": counted, "multi": multi, "concurrency": None, "second_node": True}
    return [c.name for c in CELLS if not not_staged(c, failures=failures, **kw)]


def batches(cells: list[Cell], room: int, concurrency: int | None, devices: dict[str, int]) -> list[list[Cell]]:
    """The cells in groups staged side by side for one restart: no more devices (identified: reaching the node;
    count-based: nodes of their own) than `room`, no more fabric operations held at once than fabricConcurrency (a
    stack that runs one operation at a time would queue the next attach behind a held one). `devices`: cell name ->
    the room it takes (default 1). Order kept, every cell once."""
    out: list[list[Cell]] = []
    used = ops = 0
    for cell in cells:
        need = devices.get(cell.name, 1)
        if out and used + need <= room and (concurrency is None or ops + cell.operations <= concurrency):
            out[-1].append(cell)
            used, ops = used + need, ops + cell.operations
        else:
            out.append([cell])
            used, ops = need, cell.operations
    return out


# How often a cell is staged at most: one whose state the suite's timing missed (the stack acted first, or a kill left
# its pool half-published so nothing could be allocated while it was down) is staged again in a restart of its own,
# so a correct stack is never failed for the suite's timing; a cell still not walked at the last staging fails IMP-8.
STAGINGS = 3


def stage_again(results: list[Restart], role: str) -> list[str]:
    """The role's cells not walked in their latest staging and not yet staged STAGINGS times: marked staged again,
    their names returned (in the matrix's order) for one more batch."""
    latest = {r.cell: r for r in results if r.role == role and not r.skipped}
    again = [r for r in latest.values() if r.walked and r.attempt < STAGINGS]
    for r in again:
        r.staged_again = True
    return [c.name for c in CELLS if c.name in {r.cell for r in again}]


def note_earlier(results: list[Restart]) -> None:
    """Each later staging of a cell says why the earlier ones were not walked (its report line is the one read); a
    staging followed by no staged one (the cell could not be staged again: no room, no second node) keeps its "not
    walked", so nothing passes for want of a judgement."""
    for r in results:
        if r.staged_again:
            r.staged_again = any(
                (x.cell, x.role) == (r.cell, r.role) and x.attempt > r.attempt and not x.skipped for x in results
            )
    for r in results:
        if r.attempt > 1 and not any(n.startswith("staged ") for n in r.notes):
            earlier = [x for x in results if (x.cell, x.role) == (r.cell, r.role) and x.attempt < r.attempt]
            why = "; ".join(f"staging {x.attempt} not walked: {x.walked}" for x in earlier if x.walked)
            r.notes.append(f"staged {r.attempt} times ({why})")


@dataclass
class Restart:
    """One cell of one role's restart, as observed."""

    cell: str
    role: str
    node: str
    done: str = ""  # what the restart did (Implementation.restart_role)
    together: tuple[str, ...] = ()  # the cells this one restart served
    device: str = ""  # the physical device of the cell (a move: the one that moves; multi: the held one)
    node_b: str = ""  # a move: the node the device moves to
    at_kill_seen: tuple[str, str] | None = None  # (claim, fabric) the record shows at the kill
    came_back_to: tuple[str, str] | None = None  # (claim, fabric) the record shows when the role was started
    conditions_at_kill: dict[str, str] = field(default_factory=dict)
    walked: str = ""  # why the cell was not walked ("" : it was)
    attempt: int = 1  # which staging of the cell this is (a cell not walked is staged again: STAGINGS)
    staged_again: bool = False  # not walked, and staged again in a later restart (which judges its binding)
    skipped: str = ""  # why the cell was not staged for this profile and role
    restart_s: float = 0.0
    held_s: float = 0.0  # how long the suite held the cell's operation back (its hang, the restart)
    binding_timeout_s: float = 0.0
    timeout_expected: bool = False  # what the suite held back alone reaches the bindingTimeout
    outcome: Outcome | None = None
    unbound: str = ""  # the wait's message when the pod did not bind in time
    kept: list[str] = field(default_factory=list)  # keep: probe answers that did not show it attached while in use
    move_path: list[str] = field(default_factory=list)
    move_problems: list[str] = field(default_factory=list)
    let_go: LetGo | None = None  # after the pod was deleted
    # What the path cells' own judgement found (restart_paths.py): the failure path's report and quarantine, the
    # detach path's offer after the restart.
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was seen on the way (a guard made, the failed device)

    @property
    def spec(self) -> Cell:
        return BY_NAME[self.cell]

    def where(self) -> str:
        c = self.spec
        seen = f"; at the kill claim {self.at_kill_seen[0]}, fabric {self.at_kill_seen[1]}" if self.at_kill_seen else ""
        if self.came_back_to:
            seen += f"; started again with claim {self.came_back_to[0]}, fabric {self.came_back_to[1]}"
        notes = "".join(f"; {n}" for n in self.notes)
        return (
            f"role {self.role}, cell {c.name} ({c.path} path, restarted after step '{c.step}': claim {c.claim} x "
            f"fabric {c.fabric}; {self.done or 'not restarted'}; one restart for {', '.join(self.together) or c.name})"
            f"{seen}{notes}"
        )

    def binding(self) -> list[str]:
        """What the cell owed after the restart and did not get (the let-go aside): empty when it passed."""
        if self.skipped:
            return []
        if self.walked and self.staged_again:
            return []  # the later staging owes it; this one's let-go is still judged (released)
        if self.walked:
            tries = f" (staged {self.attempt} times; the last)" if self.attempt > 1 else ""
            return [f"the cell was not walked{tries}: {self.walked}"]
        c = self.spec
        if c.owed == "let-go":
            return []
        if c.owed == "report":
            return ([self.unbound] if self.unbound else []) + self.problems
        if self.outcome is None:
            return ["nothing was observed"]
        if c.owed == "keep":
            seen = "; ".join(self.kept)
            return [f"expected attached to {self.node} while its pod is bound; last seen: {seen}"] if self.kept else []
        found = ([self.unbound] if self.unbound else []) + self.outcome.binding_problems(timeouts=self.timeout_expected)
        found += [f"a condition True before the attach on the allocation's node: {e}" for e in self.outcome.early]
        found += self.move_problems
        return found

    def released(self) -> str:
        """The let-go's problem ("" : the devices were detached and offered again in time, or not staged)."""
        if self.skipped or (self.walked and self.let_go is None):
            return ""
        found = [self.let_go.problem() if self.let_go else "no release observed"]
        found += self.problems if self.spec.owed == "let-go" else []
        return "\n".join(p for p in found if p)

    def expected(self) -> str:
        c = self.spec
        owed = {
            "bind": f"the pod bound on {self.node_b or self.node} with every device attached there, no condition True "
            "before its attach",
            "keep": f"the device attached to {self.node} while its pod is bound",
            "let-go": "the device detached and offered again within detachSeconds"
            + (", and never attached again after the restart" if c.name == "released-offered" else ""),
            "report": "the failure reported (a failure condition meaning failure True) with the failed device out of "
            "offer from then on and never attached again for the claim, the pod bound on "
            f"{self.node} with the other device attached there",
        }[c.owed]
        return owed + ("; then let go" if c.owed != "let-go" else "")

    def result(self) -> str:
        if self.skipped:
            return "not staged"
        if self.walked:
            return "not walked, staged again" if self.staged_again else "not walked"
        return "failed" if self.binding() or self.released() else "passed"

    def as_report(self) -> dict[str, Any]:
        c = self.spec
        row: dict[str, Any] = {
            "role": self.role,
            "cell": c.name,
            "path": c.path,
            "step": c.step,
            "claim": c.claim,
            "fabric": c.fabric,
            "outcome": self.result(),
            "expected": self.expected(),
        }
        if self.skipped:
            row["why"] = self.skipped
            return row
        if self.at_kill_seen:
            row["atKill"] = {"claim": self.at_kill_seen[0], "fabric": self.at_kill_seen[1]}
        if self.attempt > 1:
            row["attempt"] = self.attempt
        if self.walked and self.staged_again:
            row["notWalked"] = self.walked
        if self.came_back_to:
            row["atStart"] = {"claim": self.came_back_to[0], "fabric": self.came_back_to[1]}
        problems = self.binding() + ([p] if (p := self.released()) else [])
        if problems:
            row["lastSeen"] = problems
        row["restartSeconds"] = self.restart_s
        if self.let_go and self.let_go.after_s is not None:
            row["letGoSeconds"] = self.let_go.after_s
        return row


def matrix_report(results: list[Restart] | None) -> dict[str, Any]:
    """The matrix for conformance-report.yaml (and the HTML page): every cell of every role with its outcome, and the
    combinations not staged anywhere with why."""
    unreachable = [{"claim": c, "fabric": f, "why": why} for c, f, why in UNREACHABLE]
    paths = {path: [{"step": BY_NAME[name].step, "cell": name} for name in names] for path, names in PATHS.items()}
    if results is None:
        cells = "not run: scenario restart was not selected or ended in an error"
        return {"cells": cells, "paths": paths, "unreachable": unreachable}
    return {"cells": [r.as_report() for r in results], "paths": paths, "unreachable": unreachable}
