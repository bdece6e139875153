"""On `--provider existing` a run leaves nothing of the suite or of the implementation in the user's cluster: every
object of every listable resource (API discovery, cluster-wide) is the same before and after a whole-suite run whose
implementation the suite starts (fixtures/profiles/reference.yaml). What the control plane churns by itself (Events,
Leases, Endpoints/EndpointSlices) is left out: conformance.cluster.inventory says which and why."""

from __future__ import annotations

import time
from pathlib import Path

from conformance.cluster.client import Cluster
from conformance.cluster.inventory import CHURNED, difference, inventory, listable
from conformance.cluster.waits import WaitTimeout, wait_for
from selftest.suite_runner import ROOT, on_existing, run_suite

# Namespaces (the suite's, the implementation's) finalize asynchronously after the run has ended.
SETTLE_TIMEOUT_S = 90.0


def _terminating_namespaces(cluster: Cluster) -> list[str]:
    return [ns.metadata.name for ns in cluster.core.list_namespace().items if ns.metadata.deletion_timestamp]


def test_a_run_on_an_existing_cluster_leaves_no_object_behind(cluster: Cluster, tmp_path: Path) -> None:
    # The cluster is shared with the selftests before this one: a namespace of theirs still finalizing would be in the
    # "before" inventory and then vanish (CI saw dra-fabric-system "removed"). Start from a cluster at rest.
    wait_for(
        lambda: _terminating_namespaces(cluster),
        lambda names: not names,
        timeout=SETTLE_TIMEOUT_S,
        expected="no namespace left finalizing by the selftests run before this one",
        describe=lambda names: f"terminating: {names}",
    )
    resources = listable(cluster.api)
    before = inventory(cluster.api)
    started = time.monotonic()
    code, out, outcomes = run_suite(
        tmp_path / "junit.xml",
        *on_existing(cluster.info.kubeconfig, ROOT / "fixtures" / "profiles" / "reference.yaml"),
    )
    run_s = time.monotonic() - started
    # A failed verdict (1) still has to clean up: leftovers are checked whatever the verdict; a run that did not get
    # to its tests (usage error, cluster or implementation refused) proves nothing.
    assert code in (0, 1) and "passed" in outcomes.values(), out[-5000:]
    try:
        wait_for(
            lambda: difference(before, inventory(cluster.api)),
            lambda diff: not diff,
            timeout=SETTLE_TIMEOUT_S,
            expected=f"every object of the {len(resources)} listable resources as before the run",
            describe=lambda diff: "\n".join(diff or []),
        )
    except WaitTimeout as exc:
        raise AssertionError(f"the run left objects behind (or changed them):\n{exc}") from None
    counts = {o: list(outcomes.values()).count(o) for o in sorted(set(outcomes.values()))}
    assert code == 0, f"no leftovers, but the run failed (exit {code}, {counts}):\n{out[-5000:]}"
    print(
        f"outcomes {counts}; {len(before)} objects of {len(resources)} resources unchanged "
        f"({len(CHURNED)} churned resources left out); "
        f"run {run_s:.1f}s, settled {time.monotonic() - started - run_s:.1f}s later"
    )
