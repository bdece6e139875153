"""The node readiness daemon's decisions (fake_drivers.readier.decide): pure, no cluster."""

from __future__ import annotations

from pathlib import Path

import click

from fake_drivers.readier.cli import BROKEN_FLAGS, main
from fake_drivers.readier.decide import ATTACHED, ATTACHING, FREE, Conditions, Held, NodeDevice, Policy, decide

NODE = "node-0"
CONDITIONS = Conditions("fpga.local.example.com/ready", "fpga.local.example.com/prepare-failed")
UNPREFIXED = Conditions("Ready", "PrepareFailed")  # the API accepts condition types without a prefix
NOW = 1000.0


def device(name: str, state: str = FREE, failed_at: float | None = None) -> NodeDevice:
    return NodeDevice(
        f"uuid-{name}", name, "fake-fpga", {}, state, NODE if state != FREE else None, failed_at, "R", "M"
    )


def held(name: str, conditions: dict[str, str] | None = None, allocated_at: float = NOW - 5) -> Held:
    return Held("ns", f"claim-{name}", f"uid-{name}", NODE, name, allocated_at, conditions or {})


def test_an_allocated_free_device_is_readied_not_reported() -> None:
    plan = decide(NODE, [device("a")], [held("a")], CONDITIONS, set(), {}, NOW, Policy())
    assert [d.name for d in plan.ready] == ["a"] and not plan.report_ready


def test_reported_ready_only_once_the_device_manager_says_ready_there() -> None:
    preparing = decide(NODE, [device("a", ATTACHING)], [held("a")], CONDITIONS, set(), {}, NOW, Policy())
    assert not preparing.report_ready and not preparing.ready
    ready = decide(NODE, [device("a", ATTACHED)], [held("a")], CONDITIONS, set(), {}, NOW, Policy())
    assert [h.device for h in ready.report_ready] == ["a"]


def test_works_the_same_with_unprefixed_condition_names() -> None:
    plan = decide(NODE, [device("a", ATTACHED)], [held("a")], UNPREFIXED, set(), {}, NOW, Policy())
    assert [h.device for h in plan.report_ready] == ["a"]
    done = decide(NODE, [device("a", ATTACHED)], [held("a", {"Ready": "True"})], UNPREFIXED, set(), {}, NOW, Policy())
    assert not done.report_ready


def test_a_failed_readying_is_reported_and_the_device_hidden() -> None:
    failed = device("a", FREE, failed_at=NOW - 1)
    plan = decide(NODE, [failed, device("b")], [held("a")], CONDITIONS, set(), {}, NOW, Policy())
    assert [(h.device, r, m) for h, r, m in plan.report_failed] == [("a", "R", "M")]
    assert [d.name for d in plan.publish] == ["b"] and not plan.ready


def test_a_failure_before_the_allocation_is_not_this_claims() -> None:
    old = device("a", FREE, failed_at=NOW - 120)  # quarantine over
    plan = decide(NODE, [old], [held("a")], CONDITIONS, set(), {}, NOW, Policy())
    assert not plan.report_failed and [d.name for d in plan.ready] == ["a"] and [d.name for d in plan.publish] == ["a"]


def test_an_unheld_ready_device_is_unprepared_after_the_grace() -> None:
    first = decide(NODE, [device("a", ATTACHED)], [], CONDITIONS, set(), {}, NOW, Policy())
    assert not first.unprepare and first.unheld_since == {"uuid-a": NOW}
    later = decide(NODE, [device("a", ATTACHED)], [], CONDITIONS, set(), first.unheld_since, NOW + 3, Policy())
    assert [d.name for d in later.unprepare] == ["a"]


def test_broken_modes() -> None:
    early = Policy(broken_ready_before_prepared=True)
    assert decide(NODE, [device("a")], [held("a")], CONDITIONS, set(), {}, NOW, early).report_ready
    silent = Policy(broken_no_failure_condition=True)
    failed = device("a", FREE, failed_at=NOW - 1)
    assert not decide(NODE, [failed], [held("a")], CONDITIONS, set(), {}, NOW, silent).report_failed
    never = Policy(broken_never_ready=True)
    assert not decide(NODE, [device("a", ATTACHED)], [held("a")], CONDITIONS, set(), {}, NOW, never).report_ready


def test_report_before_unpublish_tells_the_claim_while_the_failed_device_is_still_published() -> None:
    """RDY-5's order: hidden no later than the failure is reported; broken, a second later."""
    late = Policy(broken_report_before_unpublish=True)
    failed = device("a", FREE, failed_at=NOW - 0.2)
    plan = decide(NODE, [failed], [held("a")], CONDITIONS, set(), {}, NOW, late)
    assert plan.report_failed and [d.name for d in plan.publish] == ["a"], "reported, still published"
    later = decide(NODE, [failed], [held("a")], CONDITIONS, set(), {}, NOW + 1, late)
    assert [d.name for d in later.publish] == [], "unpublished a second later"
    assert [d.name for d in decide(NODE, [failed], [held("a")], CONDITIONS, set(), {}, NOW, Policy()).publish] == []


def test_stale_modes_carry_a_devices_past_over_to_its_next_claim() -> None:
    """Reuse (IMP-28): ready once is not ready now; a failure before this allocation is not this claim's."""
    stale = Policy(broken_stale_ready=True)
    unprepared = [device("a")]
    assert not decide(
        NODE, unprepared, [held("a")], CONDITIONS, set(), {}, NOW, Policy(), frozenset({"uuid-a"})
    ).report_ready
    plan = decide(NODE, unprepared, [held("a")], CONDITIONS, set(), {}, NOW, stale, frozenset({"uuid-a"}))
    assert [h.device for h in plan.report_ready] == ["a"], "reported ready without readying"
    old = device("a", FREE, failed_at=NOW - 120)  # quarantine over, offered again
    plan = decide(NODE, [old], [held("a")], CONDITIONS, set(), {}, NOW, Policy(broken_stale_failure=True))
    assert [h.device for h, _, _ in plan.report_failed] == ["a"], "the old failure reported to the new claim"


def test_broken_flags_are_hidden_and_each_is_broken_by_a_selftest() -> None:
    assert not any(flag in main.get_help(click.Context(main)) for flag in BROKEN_FLAGS)
    selftests = (Path(__file__).resolve().parents[3] / "tests" / "selftest").glob("test_*breakage.py")
    text = "".join(path.read_text() for path in selftests)
    assert all(flag in text for flag in BROKEN_FLAGS)


def test_a_failure_stamped_after_the_rounds_now_is_hidden_before_it_is_reported() -> None:
    """A round takes `now` before it reads the claims and the device manager: a readying that fails in between is read
    in the same round with a later stamp. It is hidden in that round's slice, then reported, never the other way round
    (RDY-5's order; a run under load once reported it while the device was still published). Broken on purpose, the
    claim is still told first."""
    fresh = device("a", FREE, failed_at=NOW + 0.4)
    plan = decide(NODE, [fresh], [held("a")], CONDITIONS, set(), {}, NOW, Policy())
    assert [d.name for d in plan.publish] == [], "hidden in the round that reads the failure"
    assert [h.device for h, _, _ in plan.report_failed] == ["a"]
    broken = decide(NODE, [fresh], [held("a")], CONDITIONS, set(), {}, NOW, Policy(broken_report_before_unpublish=True))
    assert broken.report_failed and [d.name for d in broken.publish] == ["a"], "reported, still published"


def test_a_failed_device_still_published_is_never_reported() -> None:
    """Whatever the clocks say: no plan both offers a failed device and tells its claim (the quarantine over before the
    claim was told: the binding timeout, not a late report, ends that allocation)."""
    over = device("a", FREE, failed_at=NOW - 30)
    plan = decide(NODE, [over], [held("a", allocated_at=NOW - 31)], CONDITIONS, set(), {}, 1000.0, Policy(20.0))
    assert [d.name for d in plan.publish] == ["a"] and not plan.report_failed
