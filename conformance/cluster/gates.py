"""Which feature gates a real binary knows, read from its --help, and which ones the suite turns on.

The table in kep-5007.md says what each release should have; the binary says what it has. Gates that are GA
(and so hidden from --help) are on by default and are not passed: a gate locked to its default may not be set
to another value, and passing a removed gate is a startup error.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Gates the binding-conditions scenarios need, in the order of kep-5007.md.
WANTED_GATES = (
    "DynamicResourceAllocation",
    "DRAResourceClaimDeviceStatus",
    "DRADeviceBindingConditions",
    "DRADeviceTaints",  # DeviceTaintRule is how a controller keeps a failed device from being picked again.
    "DRADeviceTaintRules",
)

_GATE_RE = re.compile(
    r"(?:\b[a-z]+:)?\b([A-Za-z0-9]+)=true\|false \((ALPHA|BETA|GA|DEPRECATED) - default=(true|false)\)"
)


@dataclass(frozen=True)
class Gate:
    name: str
    stage: str
    default: bool


def known_gates(help_text: str) -> dict[str, Gate]:
    """Parse the feature gate list that a Kubernetes component prints with --help."""
    return {m[1]: Gate(m[1], m[2], m[3] == "true") for m in _GATE_RE.finditer(help_text)}


def binary_gates(binary: Path) -> dict[str, Gate]:
    proc = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    gates = known_gates(proc.stdout + proc.stderr)
    if not gates:
        raise RuntimeError(f"{binary} --help listed no feature gates (exit {proc.returncode})")
    return gates


def gates_to_enable(known: dict[str, Gate], wanted: tuple[str, ...] = WANTED_GATES) -> dict[str, bool]:
    """The wanted gates that this binary still lets us set (the rest are GA and on)."""
    return {name: True for name in wanted if name in known}


def format_gates(gates: dict[str, bool]) -> str:
    return ",".join(f"{name}={str(value).lower()}" for name, value in gates.items())


def parse_gate_overrides(text: str) -> dict[str, bool]:
    """Parse "A=true,B=false" as given on the command line; raise ValueError naming the bad entry."""
    gates: dict[str, bool] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = entry.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9]+", name) or value.lower() not in ("true", "false"):
            raise ValueError(f"bad feature gate {entry!r}: expected Name=true or Name=false")
        gates[name] = value.lower() == "true"
    return gates
