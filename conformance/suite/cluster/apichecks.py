"""Shared by the API scenarios: a one-device fabric slice, and "the apiserver refuses this, naming that field"."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.cluster.manifests import device, resource_slice

BINDING = "bindingConditions"
FAILURE = "bindingFailureConditions"


def fabric_slice(driver: str, **fields: Any) -> dict[str, Any]:
    """A slice for all nodes with one device, `fabric-gpu-0`, carrying `fields` (the KEP-5007 ones under test)."""
    return resource_slice(
        f"{driver}-fabric", driver, pool="fabric-0", all_nodes=True, devices=[device("fabric-gpu-0", **fields)]
    )


def expect_invalid(action: Callable[[], object], field: str, *reasons: str) -> list[dict[str, str]]:
    """Run `action`; the apiserver must refuse it with 422 Invalid and a cause on exactly `field` whose message
    contains one of `reasons`. Returns the causes, for further checks."""
    with pytest.raises(ApiException) as raised:
        action()
    exc = raised.value
    body = exc.body.decode() if isinstance(exc.body, bytes) else str(exc.body)
    assert exc.status == 422, f"expected 422 Unprocessable Entity, got {exc.status}: {body}"
    causes: list[dict[str, str]] = json.loads(body).get("details", {}).get("causes", [])
    on_field = [c.get("message", "") for c in causes if c.get("field") == field]
    assert on_field, f"no error names the field {field}; causes: {causes}"
    assert any(r in m for r in reasons for m in on_field), f"the error on {field} does not say {reasons}: {on_field}"
    return causes
