"""`profile check --probe-url`: the fabric probe's answer against the profile and, given a cluster, against the pools.

The rule a run relies on (observe/invariants.py, counted pools): a probe's `free[].model` must be the very value the
pools' fabric entries carry in the profile's modelAttribute (and `published.perModel` names), since the suite maps a
pool's entries to the fabric's free count by that value. A probe that says `A100` while the entries say
`nvidia-a100` makes every count check skip or fail; said here, before a run.
"""

from __future__ import annotations

import json
from typing import Any

from conformance.implementation import endpoints
from conformance.implementation.profile import Profile
from conformance.observe.slices import device_identity, fabric_slices

PROBE_TIMEOUT_S = 10.0
FREE_FIELDS = ("fabric", "model", "free", "total", "nodes")


def read_probe(url: str, ca_file: str | None = None, token: str | None = None) -> Any:
    endpoints.register(url, ca_file, token)
    try:
        with endpoints.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:
            return json.load(response)
    finally:
        endpoints.unregister(url)


def pool_models(slices: list[dict[str, Any]], prof: Profile) -> set[str]:
    """The modelAttribute values of the fabric entries the driver publishes."""
    return {
        model
        for s in fabric_slices([s for s in slices if s["spec"].get("driver") == prof.driver])
        for d in s["spec"].get("devices") or []
        if d.get("bindingConditions") and (model := device_identity(d, prof.model_attribute, prof.driver))
    }


def probe_problems(prof: Profile, body: Any, slices: list[dict[str, Any]] | None) -> tuple[list[str], list[str]]:
    """(errors, notes) of one probe answer; `slices`: the cluster's ResourceSlices (None: no cluster given)."""
    errors: list[str] = []
    if not isinstance(body, dict) or not isinstance(body.get("attachments"), list):
        return ['the probe answers no {"attachments": [...]} (docs/fabric-protocols.openapi.json)'], []
    for i, entry in enumerate(body["attachments"]):
        if not isinstance(entry, dict) or not entry.get("device") or not entry.get("node"):
            errors.append(f"attachments[{i}]: needs device and node: {entry!r}")
    free = body.get("free")
    if free is None:
        if prof.fabric_entries == "counted":
            errors.append("fabricEntries counted needs the probe's free[] (free devices per fabric and model)")
        return errors, ["the probe gives no free[]: the model rule does not apply"]
    if not isinstance(free, list):
        return [*errors, f"free is {type(free).__name__}, not a list"], []
    for i, entry in enumerate(free):
        missing = [f for f in FREE_FIELDS if not isinstance(entry, dict) or f not in entry]
        if missing:
            errors.append(f"free[{i}]: lacks {missing}: {entry!r}")
    models = {str(e["model"]) for e in free if isinstance(e, dict) and "model" in e}
    notes = [f"the probe's free[].model values: {sorted(models)}"]
    unknown = sorted(set(prof.published.per_model) - models)
    if unknown:
        errors.append(
            f"published.perModel names {unknown}, which no free[].model of the probe is "
            f"(its models: {sorted(models)}): they must be the same values as the pools' {prof.model_attribute} "
            "(modelAttribute)"
        )
    if slices is not None:
        published = pool_models(slices, prof)
        notes.append(f"the fabric entries' {prof.model_attribute} values: {sorted(published)}")
        if published - models:
            errors.append(
                f"fabric entries carry {prof.model_attribute} {sorted(published - models)}, which no free[].model of "
                f"the probe is (its models: {sorted(models)}): the suite maps entries to free counts by that value"
            )
    return errors, notes
