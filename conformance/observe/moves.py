"""The order of a device's move between nodes, judged on the fabric probe's answers (IMP-19 and the restart matrix's
move cells): it must leave the first node before any answer lists it on the second."""

from __future__ import annotations

from conformance.observe.attachments import stamp
from conformance.observe.recorder import Sample


def judge_move(samples: list[Sample], device: str, node_b: str) -> tuple[list[str], list[str]]:
    """The device's path through the probe's answers, and what is wrong with its order: listed on another node, it
    must leave it (an answer with it free, or detaching from there) before any answer lists it on B."""
    path: list[str] = []
    problems: list[str] = []
    left, last, where = True, "", ""
    for s in samples:
        state = s.states.get(device)
        said = f"{state[1]} {state[0]}" if state else "free"
        if said != last:
            path.append(f"{stamp(s.sent)} {said}")
            last = said
        if state is None:
            left = True
        elif state[0] != node_b:
            left, where = state[1] == "detaching", state[0]
        else:
            if not left:
                problems.append(
                    f"the probe answer sent {stamp(s.sent)} lists {device} {state[1]} on {node_b} with no answer "
                    f"between showing it leave {where} (free, or detaching from {where})"
                )
            break
    return path, problems
