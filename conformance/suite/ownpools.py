"""The suite's own pools and drivers, named as such wherever the implementation's log lines mention them.

While the implementation starts and coexistence is judged, the suite plays drivers of its own (the cluster scenarios'
`sch-...` drivers with pools such as `a-fabric` and `z-local`, the API tests', the other driver of IMP-17 with its
pool `other-driver-fabric`; all named `<purpose>-<hex>.conformance.example.com`, manifests.unique_driver). A stack
that trips over one of them logs its name ("unknown device name: a-fabric"), which a vendor reads as a pool of its
own or of its cluster. Each quoted log line that names one is followed by a line saying whose it is.
Pure functions over the record's slice summaries and the log lines, so the unit tests feed them synthetic ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from conformance.cluster.manifests import SUITE_DRIVER_DOMAIN

PURPOSES = {  # unique_driver's purposes: who plays the driver
    "sch": "the suite's cluster scenarios",
    "api": "the suite's API tests",
    "local": "the suite's node-local allocation test",
    "other": "the suite's coexistence check (IMP-17: another driver live beside the implementation)",
    "imp9": "the suite's least-privilege checks (IMP-9)",
    "scale": "the suite's baseline wave of SCALE-1",
    "preflight": "the suite's check of an existing cluster",
}


def suite_driver(driver: str) -> bool:
    return driver.endswith(f".{SUITE_DRIVER_DOMAIN}")


def whose(driver: str) -> str:
    purpose = driver.split(".", 1)[0].rsplit("-", 1)[0]
    return PURPOSES.get(purpose, "the conformance suite")


def suite_names(slices: Iterable[dict[str, Any]], own_driver: str) -> dict[str, str]:
    """Name -> whose it is, for every suite-owned driver and pool the slice summaries show (a pool name the
    implementation's own driver also publishes is left out: a line naming it may mean its own)."""
    own_pools, found = set(), {}
    for s in slices:
        driver, pool = s.get("driver") or "", s.get("pool") or ""
        if driver == own_driver:
            own_pools.add(pool)
        elif suite_driver(driver):
            found[driver] = f"a driver played by {whose(driver)}"
            if pool:
                found.setdefault(pool, f"a pool of {whose(driver)} (driver {driver})")
    return {name: text for name, text in found.items() if name not in own_pools}


def _mentions(line: str, names: dict[str, str]) -> list[str]:
    """The names a line mentions as whole tokens (a pool name followed by a period ends a sentence; one followed by
    `.word` is part of a longer name)."""
    return [
        name
        for name in sorted(names, key=len, reverse=True)
        if re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w/-]|\.\w)", line)
    ]


def mentioned(lines: Iterable[str], names: dict[str, str]) -> list[str]:
    """Every suite-owned name the lines mention, in order of first mention."""
    return list(dict.fromkeys(n for line in lines for n in _mentions(line, names)))


def annotate(lines: list[str], names: dict[str, str], indent: str = "    ") -> list[str]:
    """The lines, the first one that names a suite-owned pool or driver followed by a line saying whose it is (once
    per name: a stack repeats its complaint every pass)."""
    out, said = [], set()
    for line in lines:
        out.append(line)
        for n in _mentions(line, names):
            if n not in said:
                said.add(n)
                out.append(f"{indent}^ {n}: {names[n]}, not the implementation's")
    return out


def summary(names: dict[str, str], found: list[str]) -> str:
    """One line: the suite-owned names the implementation's log lines mention, grouped by whose they are."""
    by_owner: dict[str, list[str]] = {}
    for n in found:
        owner = names[n].split(" (driver ")[0].removeprefix("a pool of ").removeprefix("a driver played by ")
        kind = "driver" if names[n].startswith("a driver") else "pool"
        by_owner.setdefault(owner, []).append(f"{kind} {n}")
    return "; ".join(f"{', '.join(items)}: {owner}" for owner, items in by_owner.items())
