"""The order clauses (test_order.py, conformance/observe/order.py) and the reuse judgement (IMP-28, test_reuse.py) fail
on a reference stack broken in the way each is about, with the wrong order (or the reuse) on the failure's first line,
and pass on the correct one (the reference profiles' own runs).

Runs the real suite in a subprocess against its own local cluster (needs the cached binaries), with only the churn
(small-pool-churn, which walks every clause in one short run) and the run-wide order tests selected:
- `--broken-report-before-hiding` (keep-in-pool): the attach failure is reported 1 s before the device is hidden, which
  is still before the scheduler's next PreBind poll deallocates (IMP-4's quarantine alone would pass it);
- `--broken-early-reschedule` (reschedule-to-local, a node driver that hot-plugs 5 s late): the reschedule is asked for
  before the node-local copy is published (IMP-7);
- `--broken-report-while-attaching` (keep-in-pool): `attached` True as soon as a 1 s attach is in flight: the pod binds
  at the next poll, attached by then (IMP-2 passes), the condition came first (IMP-3);
- `--broken-detach-on-claim-delete` (keep-in-pool): a claim deleted 2 s before its pod loses its device at once
  (IMP-10);
- `--broken-stale-ready` (node-local): a device readied once is reported ready to its next claim without readying it
  again (IMP-28, and RDY-3 for the churn's claims);
- `--broken-stale-failure` (node-local): a device whose readying failed is reported failed to its next claim once
  offered again (IMP-28: a failure not cleared);
- `--broken-report-before-unpublish` (node-local): a readying failure is reported while the failed device is still
  published, unpublished a second later (RDY-5's clause of HIDDEN);
- `--broken-accept-attached-elsewhere` (keep-in-pool, with the mobility scenario that moves a device): conditions
  True for node B while the device is still attached to A (IMP-3: attached to THAT node);
- `--broken-stale-attached` (keep-in-pool): a device once attached is reported attached to its next claim without an
  attach: the churn's uses on a second node after the rest fail IMP-28 (after a move); with `--idle-grace 0` the
  devices are detached between the churn's claims, and its uses on the same node fail it (released).

Which clause or reuse path each variant fails (issue 41's done-when): HIDDEN under IMP-4 report-before-hiding, under
RDY-5 report-before-unpublish; COPY early-reschedule; ATTACHED report-while-attaching (before the attach) and
accept-attached-elsewhere (another node); DETACH detach-on-claim-delete; reuse after a failure stale-failure, readied
once stale-ready, after a move stale-attached, released stale-attached with --idle-grace 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selftest.suite_runner import failure_first_line, profile_changes, run_suite

ORDER = "conformance/suite/implementation/test_order.py"
KEEP = '"--mode", "keep-in-pool"]'
RESCHEDULE = '"--mode", "reschedule-to-local"'
SLOW_COPY = ('"--republish"]', '"--republish", "--hotplug-delay", "5"]')
READIER = '"--interval", "0.3"]'
REUSE = "test_every_second_use_of_a_device_is_served_afresh"


def _keep(flag: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return "reference.yaml", ((KEEP, f'"--mode", "keep-in-pool", "{flag}"]'),)


def _readier(flag: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return "reference-nodelocal.yaml", ((READIER, f'"--interval", "0.3", "{flag}"]'),)


@pytest.mark.parametrize(
    ("variant", "test", "says"),
    [
        (
            _keep("--broken-report-before-hiding"),
            "test_a_failed_device_is_out_of_offer_when_its_failure_is_reported",
            ("while the device was still offered", "out of offer only at revision"),
        ),
        (
            (
                "reference-reschedule.yaml",
                ((RESCHEDULE, f'{RESCHEDULE}, "--broken-early-reschedule"'), SLOW_COPY),
            ),
            "test_a_reschedule_is_asked_for_only_once_the_node_local_copy_is_published",
            ("before the node-local copy it points to was published", "first at revision"),
        ),
        (
            _keep("--broken-report-while-attaching"),
            "test_binding_conditions_are_true_only_once_attached_to_that_node",
            ("before the device was attached there", "True at revision"),
        ),
        (
            _keep("--broken-detach-on-claim-delete"),
            "test_a_detach_begins_only_after_the_last_pod_using_the_device_is_gone",
            ("detach began by", "bound at revision"),
        ),
        (_readier("--broken-stale-ready"), REUSE, ("reused (", "stale state:")),
        (_readier("--broken-stale-failure"), REUSE, ("reused (after a failure)", "stale failure:")),
        (
            _readier("--broken-report-before-unpublish"),
            "test_a_device_whose_readying_failed_is_unpublished_when_its_failure_is_reported",
            ("while the device was still offered", "out of offer only at revision"),
        ),
        (
            _keep("--broken-accept-attached-elsewhere"),
            "test_binding_conditions_are_true_only_once_attached_to_that_node",
            ("before the device was attached there", "attached on"),
        ),
        (_keep("--broken-stale-attached"), REUSE, ("reused (after a move)", "stale state:")),
        (
            ("reference.yaml", ((KEEP, '"--mode", "keep-in-pool", "--broken-stale-attached", "--idle-grace", "0"]'),)),
            REUSE,
            ("reused (released)", "stale state:"),
        ),
    ],
    ids=[
        "report-before-hiding",
        "early-reschedule",
        "report-while-attaching",
        "detach-on-claim-delete",
        "stale-ready",
        "stale-failure",
        "report-before-unpublish",
        "accept-attached-elsewhere",
        "stale-attached-after-a-move",
        "stale-attached-released",
    ],
)
def test_each_wrong_order_or_stale_reuse_fails_with_it_on_thefailure_first_line(
    tmp_path: Path, variant: tuple[str, tuple[tuple[str, str], ...]], test: str, says: tuple[str, ...]
) -> None:
    source, changes = variant
    profile = profile_changes(tmp_path, source, *changes)
    junit = tmp_path / "junit.xml"
    # The churn walks every clause but a device attached elsewhere (it rests until every device is let go before it
    # moves them): the mobility scenario moves one while it is still attached.
    module = "test_mobility.py" if "accept-attached-elsewhere" in changes[0][1] else "test_reuse.py"
    code, out, outcomes = run_suite(
        junit, "--profile", str(profile), ORDER, target=f"conformance/suite/implementation/{module}"
    )
    assert code == 1, f"expected a failure (exit 1), got {code}:\n{out[-3000:]}"
    assert outcomes.get(test) == "failure", f"{test} did not fail: {outcomes}\n{out[-3000:]}"
    line = failure_first_line(junit, test)
    assert all(s in line for s in says), f"the first line does not name the order: {line!r}\n{out[-3000:]}"
    assert "claim " in line and "revision" in line, line
    print(f"{source} {changes[0][1]}: {test} failed with: {line[:600]}")  # -rP prints it
