"""Which known upstream defect (cluster/defects.py) a cluster's double allocations are, if all are one.

Shared by the SCH-9 checks and by implementation scenarios left unjudged because of the cluster (scenario.py): a
failure is named a known defect only when EVERY double allocation shows the defect's symptom on a release it lists;
one that does not is a new failure and is said so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from conformance.cluster.defects import HOLDER_PAST_TIMEOUT, KnownDefect, known_defect
from conformance.cluster.providers.base import ClusterInfo
from conformance.observe.allocations import DoubleAllocation, judge, past_binding_timeout
from conformance.observe.recorder import Record, Recorder

SHOWN = 20  # double allocations listed in a message (all are counted)


@dataclass
class Explained:
    defect: KnownDefect | None  # names every double allocation, or None
    unexplained: list[DoubleAllocation] = field(default_factory=list)  # not the symptom of a known defect

    def heading(self, count: int) -> str:
        """The first line of a failure: the known defect, or that some doubles are not one."""
        if self.defect is not None:
            return (
                f"{self.defect.label()} (every one of the {count} double allocations below is its symptom: the first "
                f"holder's pod had timed out in PreBind; write-up {self.defect.writeup}; the requirement still fails)"
            )
        if count and len(self.unexplained) < count:
            return f"{len(self.unexplained)} of the {count} double allocations are not the symptom of a known defect"
        return ""


def explain(doubles: list[DoubleAllocation], records: Iterable[Record], info: ClusterInfo) -> Explained:
    if not doubles:
        return Explained(None)
    matched = past_binding_timeout(records, doubles, info.binding_timeout_s)
    unexplained = [d for d in doubles if d not in matched]
    # A patched control plane is not the release the defect was measured on: a patch meant to fix it must pass, and
    # one that does not fails as any failure does (never accepted as the release's known defect).
    defect = None if info.patched else known_defect("SCH-9", HOLDER_PAST_TIMEOUT, info.version)
    if defect is None:
        return Explained(None, list(doubles))
    return Explained(defect if not unexplained else None, unexplained)


def describe(doubles: list[DoubleAllocation], explained: Explained) -> str:
    """The failure message of an SCH-9 check: the known defect (or not) first, then the double allocations (those
    that are no known defect's symptom marked, when only some are)."""
    mark = explained.defect is None and 0 < len(explained.unexplained) < len(doubles)
    lines = [line for line in (explained.heading(len(doubles)),) if line]
    lines.append(f"{len(doubles)} times a device was allocated to a claim while another claim held it:")
    for d in doubles[:SHOWN]:
        lines.append(f"  {d}" + ("  [not a known defect's symptom]" if mark and d in explained.unexplained else ""))
    return "\n".join(lines)


def for_holders(record: Recorder, holders: set[str], info: ClusterInfo) -> str:
    """What an implementation scenario left unjudged says about the cluster's double allocations among `holders`
    (claims, namespace/name): the known defect they all are, or that they are none."""
    records = record.select(("claim",))
    doubles = [d for d in judge(records).doubles if {d.first.claim, d.second.claim} & holders]
    if not doubles:
        return ""
    explained = explain(doubles, records, info)
    if explained.defect is not None:
        return f"{explained.defect.label()}, write-up {explained.defect.writeup}"
    return "not the symptom of a known upstream defect"
