"""Known upstream defects of Kubernetes releases (known-defects.yaml): which requirement a defect breaks, on which
releases, and the exact symptom a check must have seen to name it.

A release's defect is a fact about the cluster, like the gates in versions.py; naming it changes no outcome: the
requirement stays failed and the cluster verdict failure. It tells a reader (and CI, through `--accept
known-defect:ID`) that the failure is the one already reported upstream, not a new one.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from conformance.cluster.versions import UnsupportedVersion, parse_server_version

FILE = Path(__file__).with_name("known-defects.yaml")
ACCEPT_PREFIX = "known-defect:"
# The symptoms a check can report; each is matched by the code that judges its requirement.
Symptom = Literal[
    "allocated-while-holder-past-binding-timeout",
    "released-before-node-unprepared",
    "scheduler-panicked-in-resourceslice-tracker",
]
HOLDER_PAST_TIMEOUT: Symptom = "allocated-while-holder-past-binding-timeout"
RELEASED_BEFORE_UNPREPARE: Symptom = "released-before-node-unprepared"
TRACKER_PANIC: Symptom = "scheduler-panicked-in-resourceslice-tracker"


class KnownDefect(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    requirement: str
    symptom: Symptom
    summary: str
    releases: list[str]  # minors ("1.37") or exact versions ("1.38.0-beta.0")
    measured: list[str] = Field(default_factory=list)
    unaffected: list[str] = Field(default_factory=list)  # the reproducer ran there and did not show it
    writeup: str  # repository path of the write-up
    # False: upstream behaviour the suite shows and records, failing no requirement for it (upstream's answer is that
    # the driver must defend against it, and the requirement judges that defence); a run lists it as observed.
    fails: bool = True

    def covers(self, version: str) -> bool:
        """Whether the cluster's version (as the server reports it) is one of the defect's releases."""
        try:
            v = parse_server_version(version)
        except UnsupportedVersion:
            return False
        return any(r in (str(v), f"{v.major}.{v.minor}") for r in self.releases)

    def label(self) -> str:
        return f"known upstream defect: {self.id}"


@functools.cache
def catalogue() -> dict[str, KnownDefect]:
    loaded = [KnownDefect.model_validate(d) for d in yaml.safe_load(FILE.read_text()) or []]
    found = {d.id: d for d in loaded}
    if len(found) != len(loaded):
        raise ValueError(f"{FILE}: a known defect id appears twice")
    return found


def known_defect(requirement: str, symptom: Symptom, version: str) -> KnownDefect | None:
    """The known defect of this release whose symptom a check saw, or None (then the failure is a new one)."""
    return next(
        (d for d in catalogue().values() if (d.requirement, d.symptom) == (requirement, symptom) and d.covers(version)),
        None,
    )


def accepted(values: list[str]) -> set[str]:
    """The known defect ids named by `--accept known-defect:ID` values (others are ignored here); an unknown id is
    an error, so a typo cannot accept nothing silently."""
    ids = {v.removeprefix(ACCEPT_PREFIX) for v in values if v.startswith(ACCEPT_PREFIX)}
    unknown = sorted(ids - set(catalogue()))
    if unknown:
        raise ValueError(f"unknown known defect(s) {unknown}; known: {sorted(catalogue())}")
    return ids


def check_accepts(values: list[str]) -> None:
    """`--accept` values of a run or a matrix: 'partial' or 'known-defect:ID' with a known id; ValueError says which
    value is wrong (a typo must not accept nothing silently)."""
    for value in values:
        if value != "partial" and not value.startswith(ACCEPT_PREFIX):
            raise ValueError(f"{value}: expected 'partial' or '{ACCEPT_PREFIX}ID'")
    accepted(values)


# The test property (JUnit, and read by the plugin) that names the known defect a failed test saw.
PROPERTY = "known_defect"
# The test property that names a known defect of kind `fails: false` a passed (or skipped) test saw happen.
OBSERVED_PROPERTY = "observed_defect"
