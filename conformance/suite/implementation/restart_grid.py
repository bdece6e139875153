"""IMP-8's restart matrix as data: the cells (the claim's state x the fabric's state of its device when a restarted role
comes back, and the steps of every path between), what the record must show at the kill for each, the paths' steps in
order, and the combinations of the grid no cell stages (and why). How they are planned, batched and judged:
restart_cells.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Owed = Literal["bind", "keep", "let-go", "report"]


@dataclass(frozen=True)
class Cell:
    name: str  # the pytest id and the report's key
    claim: str  # the claim's state the role comes back to
    fabric: str  # the fabric's state of the device the role comes back to
    staged: str  # how the suite puts the device there
    owed: Owed
    holds: int = 0  # fabric operations the suite holds in flight across the restart
    down: bool = False  # staged while the role is down: a process role only
    move: bool = False  # a device released on node A and leased to a pod pinned to node B
    multi: bool = False  # a claim of devicesPerClaim devices
    path: str = "attach"  # the path the cell stands on (PATHS)
    step: str = ""  # the step of its path the role is restarted right after (PATHS)
    grid: bool = True  # one combination of the claim x fabric grid (the path cells repeat some at other steps)
    failure: bool = False  # an attach made to fail: needs attachFailureReporting
    devices: int = 1  # devices its claim may be given (a failure cell: a second one to be reallocated to)

    @property
    def operations(self) -> int:
        """Fabric operations the cell has in flight at once at its kill point (fabricConcurrency)."""
        return 2 if self.multi else 1


CELLS: tuple[Cell, ...] = (
    Cell(
        "released-detaching",
        "released",
        "detaching",
        "the pod bound, deleted with its claim; the detach held in flight (a hang fault) across the restart",
        "let-go",
        holds=1,
        path="detach",
        step="detach sent",
    ),
    Cell(
        "released-attached",
        "released",
        "attached",
        "the pod bound; pod and claim deleted while the role is down, before any detach was sent",
        "let-go",
        down=True,
        path="detach",
        step="decided",
    ),
    Cell(
        "ready-attached",
        "ready",
        "attached",
        "the pod bound and using the device across the restart",
        "keep",
        step="in use",
    ),
    Cell(
        "move-attached-a",
        "allocated or pending (the model's)",
        "attached to A",
        "the device used on A; while the role is down A's pod and claim deleted and a pod pinned to B created and "
        "tried by the scheduler (keep-in-pool: B's claim allocated the device still on A; reschedule-to-local: "
        "pending until it is free): the detach from A decided, not sent",
        "bind",
        down=True,
        move=True,
        path="move",
        step="detach from A decided",
    ),
    Cell(
        "move-detaching-a",
        "allocated or pending (the model's)",
        "detaching from A",
        "the device used on A, released, a pod pinned to B created; the detach from A held in flight",
        "bind",
        holds=1,
        move=True,
        path="move",
        step="detach from A sent",
    ),
    Cell(
        "move-attaching-b",
        "allocated",
        "attaching to B",
        "the device used on A, released, a pod pinned to B created; the attach to B held in flight",
        "bind",
        holds=1,
        move=True,
        path="move",
        step="attach to B sent",
    ),
    Cell(
        "released-attaching",
        "released",
        "attaching",
        "an attach held in flight, then the pod and claim deleted: the restart comes to an attach nobody wants",
        "let-go",
        holds=1,
        path="abandoned attach",
        step="released mid-attach",
    ),
    Cell(
        "multi-one-attaching",
        "allocated (reschedule-to-local: or pending, rescheduled for the attached ones)",
        "one attaching, the others attached",
        "a claim of devicesPerClaim devices: one attach held in flight, the others attached",
        "bind",
        holds=1,
        multi=True,
        path="multi",
        step="one of several attaches sent",
    ),
    Cell(
        "allocated-attaching",
        "allocated",
        "attaching",
        "the attach held in flight (a hang fault) across the restart",
        "bind",
        holds=1,
        step="attach sent",
    ),
    Cell(
        "allocated-attached",
        "allocated",
        "attached",
        "the attach completes while the role is down, no condition written yet (a held attach let go between kill "
        "and start: a process role only)",
        "bind",
        holds=1,
        step="attach done",
    ),
    Cell(
        "allocated-free",
        "allocated",
        "free",
        "the pod created and its claim allocated while the role is down: the attach decided (by the allocation) "
        "but not yet sent to the fabric",
        "bind",
        down=True,
        step="decided",
    ),
    Cell(
        "pending-free",
        "pending",
        "free",
        "the role killed, the pod created while it is down, the role started (restart command: the pod created "
        "before it, held at a scheduling gate until it returned)",
        "bind",
        step="pending",
    ),
    # The detach path's steps between the decision (released-attached) and the offer: each held by the fault injector.
    Cell(
        "released-guarded",
        "released",
        "attached",
        "the pod bound, deleted with its claim; every detach of the device refused by the fabric (an `unreachable` "
        "fault on it) until the role is back: the stack has hidden the device if it guards a detach, and tried the "
        "detach",
        "let-go",
        path="detach",
        step="guard made",
        grid=False,
    ),
    Cell(
        "released-detached",
        "released",
        "detaching, then free while the role is down",
        "the pod bound, deleted with its claim; the detach held in flight and let complete between kill and start (a "
        "process role only): the role comes back to a device detached and not yet offered again",
        "let-go",
        holds=1,
        down=True,
        path="detach",
        step="detach done",
        grid=False,
    ),
    Cell(
        "released-offered",
        "released",
        "free",
        "the pod bound, deleted with its claim, the device detached and offered again before the restart: after it "
        "the device stays detached and offered",
        "let-go",
        path="detach",
        step="offered again",
        grid=False,
    ),
    # The failure path's steps: an attach that fails (and keeps failing), one of two devices for the claim.
    Cell(
        "failed-seen",
        "allocated",
        "attaching, then failed while the role is down",
        "the attach held in flight and let fail between kill and start (a process role only; every later attach of "
        "the device fails too): the role comes back to a failure nobody has acted on",
        "report",
        holds=1,
        down=True,
        path="failure",
        step="failure seen",
        grid=False,
        failure=True,
        devices=2,
    ),
    Cell(
        "failed-hidden",
        "allocated",
        "free (the attach failed)",
        "the attach fails; the claim's failure report refused by an admission policy of the suite's until the role "
        "is back: the role comes back to a failed device out of offer, not yet reported",
        "report",
        path="failure",
        step="device out of offer",
        grid=False,
        failure=True,
        devices=2,
    ),
    Cell(
        "failed-reported",
        "allocated, failure condition True",
        "free (the attach failed)",
        "the attach fails; the role restarted as soon as the record shows the failure condition True, before the "
        "scheduler's next PreBind poll deallocates",
        "report",
        path="failure",
        step="failure reported",
        grid=False,
        failure=True,
        devices=2,
    ),
)
BY_NAME = {c.name: c for c in CELLS}
# Every path's steps in order, each with the cell that restarts a role right after it.
PATHS: dict[str, tuple[str, ...]] = {
    "attach": ("pending-free", "allocated-free", "allocated-attaching", "allocated-attached", "ready-attached"),
    "detach": ("released-attached", "released-guarded", "released-detaching", "released-detached", "released-offered"),
    "failure": ("failed-seen", "failed-hidden", "failed-reported"),
    "move": ("move-attached-a", "move-detaching-a", "move-attaching-b"),
    "multi": ("multi-one-attaching",),
    "abandoned attach": ("released-attaching",),
}
# (claim, fabric) the record must show at the kill for the cell to be walked ("*": either, the model's); a process
# role's cells staged while it is down (pods created or deleted, a claim allocated, a held attach let complete) are
# checked for that too (restart_walked.py came_back); the path cells' own marks too (restart_paths.py walked).
AT_KILL: dict[str, tuple[str, str]] = {
    "released-detaching": ("released", "detaching"),
    "released-attached": ("ready", "attached"),
    "ready-attached": ("ready", "attached"),
    "move-attached-a": ("*", "attached to A"),
    "move-detaching-a": ("*", "detaching from A"),
    "move-attaching-b": ("allocated", "attaching to B"),
    "released-attaching": ("released", "attaching"),
    "multi-one-attaching": ("*", "one attaching, the others attached"),
    "allocated-attaching": ("allocated", "attaching"),
    "allocated-attached": ("allocated", "attaching"),
    "allocated-free": ("pending", "free"),
    "pending-free": ("pending", "free"),
    "released-guarded": ("released", "attached"),
    "released-detached": ("released", "detaching"),
    "released-offered": ("released", "free"),
    "failed-seen": ("allocated", "attaching"),
    "failed-hidden": ("allocated", "free"),
    "failed-reported": ("*", "free"),
}

# The combinations no cell stages, and why.
UNREACHABLE: tuple[tuple[str, str, str], ...] = (
    (
        "pending",
        "attaching",
        "a device is attached for an allocation: before its claim is allocated no attach of it is owed (an attach "
        "of a device no claim holds is judged by the run-wide fabric truth, IMP-12)",
    ),
    (
        "pending",
        "attached",
        "keep-in-pool: the allocation is never cleared on the happy path; reschedule-to-local: only between the "
        "scheduler's deallocation after the reschedule condition and its reallocation to the node-local copy (one "
        "backoff, the scheduler's to close: the suite cannot hold it there without changing what it may allocate); "
        "a pending claim whose device is still attached to ANOTHER node is cell move-attached-a",
    ),
    (
        "pending",
        "detaching",
        "only as a move (reschedule-to-local: B's claim waits while the device leaves A): cell move-detaching-a",
    ),
    (
        "allocated",
        "detaching",
        "on its own node, a detach of a device a live allocation holds is a loss (IMP-10); as a move (B's claim "
        "allocated while the device leaves A): cell move-detaching-a",
    ),
    ("ready", "free", "conditions True with the device not attached: IMP-3 forbids it, no correct stack gets there"),
    ("ready", "attaching", "conditions True before the attach completed: IMP-3 forbids it"),
    ("ready", "detaching", "a device detached while its bound pod uses it: IMP-10 forbids it"),
    (
        "released",
        "free",
        "nothing is left for the stack to do but to keep the device offered: a restart there is the detach path's "
        "last step (cell released-offered, off the grid); a device attached afterwards with no claim is judged by the "
        "run-wide fabric truth (IMP-12)",
    ),
)
