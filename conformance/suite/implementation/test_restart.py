"""IMP-8 as a matrix: every restartable role of the stack (Profile.restartable(): a process the suite kills with
SIGKILL and starts again, or a declared restart command) restarted with a device in every reachable combination of
the claim's state (pending, allocated, conditions True, released) and the fabric's state of the device (free,
attaching, attached, detaching), including the moments between the claim's change and the fabric's reaction
(released while still attached; allocated while still free: decided, not yet sent), a device moving from node A to
node B, and a claim of several devices with one attach in flight. The cells, the combinations no cell stages (and
why), how the cells are judged and reported: restart_cells.py.

How a cell is staged (restart_staging.py), the role restarted over a batch of cells and each cell followed
(restart_batch.py), whether a cell was walked (restart_walked.py). The roles are restarted one after another.

Nothing may be lost: a pod ends bound on its node with devices the fabric says are attached there (outcome.py: either
binding model), no allocation cleared by a failure condition or (unless what the suite held back alone reaches it) by
the binding timeout, no condition True before its device was attached to the allocation's node; a bound pod's device
stays attached across the restart; once pods and claims are gone the devices are detached and offered again within
detachSeconds (plus the time the suite held the detach or the role back).
The scenario restarts the shared stack, so it runs alone (exclusive=True, suite/exclusive.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.implementation.profile import ProfileError, load_profile
from conformance.suite.implementation.restart_batch import run_batch
from conformance.suite.implementation.restart_cells import STAGINGS, Restart, by_design, note_earlier, stage_again
from conformance.suite.implementation.restart_staging import plan
from conformance.suite.scenario import Context, ScenarioFailed, result_fixture, scenario


def _matrix(ctx: Context) -> list[Restart]:
    out: list[Restart] = []
    for role in ctx.profile.restartable():
        planned, skipped, n = plan(ctx, role)
        for cells in planned:
            out += run_batch(ctx, role, cells, n)
        for attempt in range(2, STAGINGS + 1):  # what the suite's timing missed is staged again (restart_cells.py)
            again = stage_again(out, role.name)
            if not again:
                break
            ctx.say(f"restart {role.name}: staging again (attempt {attempt} of {STAGINGS}) {', '.join(again)}")
            for cells in plan(ctx, role, again)[0]:  # one that cannot be staged again keeps it (note_earlier)
                out += run_batch(ctx, role, cells, n, attempt)
        out += skipped
    note_earlier(out)
    for r in out:
        if not r.skipped:
            ctx.say(f"restart {r.role} {r.cell}: {r.result()}")
    return out


scenario(
    "restart",
    "each restartable role is restarted with a device in every reachable combination of the claim's state and the "
    "fabric's (restart matrix: decided but not sent, in flight, done but unreported, released, moving between nodes, "
    "one of several devices); nothing is lost",
    ("IMP-8",),
    probe=True,
    faults=True,
    controller=("process",),
    exclusive=True,  # it restarts the shared stack: other scenarios must not see that (suite/exclusive.py)
)(_matrix)


restart_matrix = result_fixture("restart_matrix", "restart")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per cell the profile's design can stage (restart_cells.by_design); without a profile, every cell."""
    if "cell" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("--profile", None)
    profile = None
    if chosen and chosen != "none":
        try:
            profile = load_profile(chosen).profile
        except ProfileError:
            profile = None  # the plugin refuses the profile, saying why
    metafunc.parametrize("cell", by_design(profile))


@pytest.fixture
def restarts(cell: str, restart_matrix: Any) -> Any:
    """One cell's restarts (each role): a failed scenario fails the test through the plugin (ScenarioFailed); a cell
    no role could stage in this run is skipped with why."""
    if isinstance(restart_matrix, ScenarioFailed):
        return restart_matrix
    found = [r for r in restart_matrix if r.cell == cell]
    if found and all(r.skipped for r in found):
        pytest.skip("; ".join(f"role {r.role}: {r.skipped}" for r in found))
    return [r for r in found if not r.skipped]


def _described(r: Restart, problems: list[str]) -> str:
    lines = [r.where(), f"expected: {r.expected()}", "last seen: " + "\n    ".join(problems)]
    if r.outcome is not None and r.cell not in ("released-detaching", "released-attaching", "released-attached"):
        lines.append(r.outcome.describe())
    timing = f"the restart took {r.restart_s:.1f}s, the suite held it back {r.held_s:.1f}s; bindingTimeout "
    timing += f"{r.binding_timeout_s:g}s" + (
        " (a timeout on the way accepted: what the suite held reaches it)" * r.timeout_expected
    )
    return "\n  ".join([*lines, timing])


@pytest.mark.requirement("IMP-8")
def test_the_pod_binds_by_an_allowed_path_after_the_restart(restarts: list[Restart]) -> None:
    problems = [_described(r, found) for r in restarts if (found := r.binding())]
    assert not problems, "\n".join(problems)


@pytest.mark.requirement("IMP-8")
def test_nothing_stays_attached_after_the_restart(restarts: list[Restart]) -> None:
    problems = [_described(r, [p]) for r in restarts if (p := r.released())]
    assert not problems, "\n".join(problems)
