"""kube-apiserver validation of the KEP-5007 fields and of ResourceClaim status.

The binding-condition rules (set together, no overlap, no duplicates, qualified names) are checked on both
places the fields live: ResourceSlice devices and claim allocation results. Claims here are never scheduled:
the test writes status.allocation itself, as an admin through the status subresource, the way the scheduler
does; the driver names are the suite's own, so no implementation ever sees these objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import RESOURCE_API, resource_claim, unique_driver
from conformance.cluster.objects import ObjectTracker
from conformance.suite.cluster.apichecks import BINDING, FAILURE, expect_invalid, fabric_slice

MERGE_PATCH = "application/merge-patch+json"
ATTACHED = "fabric.example.com/attached"
FAILED = "fabric.example.com/attach-failed"
RESULTS = "status.allocation.devices.results[0]"
# 1.37 enforces the declarative (+k8s:update=NoModify) rule, whose message replaces the handwritten "field is
# immutable"; both name status.allocation.
# 1.37 words it "field cannot be modified once set" (a newer declarative rule); 1.34-1.36 "field is immutable".
IMMUTABLE = ("field cannot be modified once set", "field is immutable")


def allocation(
    driver: str, dev: str = "fabric-gpu-0", pool: str = "fabric-0", node: str = "node-a", **fields: Any
) -> dict[str, Any]:
    """An allocation of one device for the claim's request `dev`, pinned to `node` (what bindsToNode yields)."""
    selector = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    result = {"request": "dev", "driver": driver, "pool": pool, "device": dev, **fields}
    return {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [selector]}}


def device_status(driver: str, dev: str, pool: str = "fabric-0") -> dict[str, Any]:
    """A status.devices entry with one condition, as an attach controller reports it."""
    condition = {
        "type": ATTACHED,
        "status": "True",
        "reason": "Attached",
        "message": "attached by the test",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    return {"driver": driver, "pool": pool, "device": dev, "conditions": [condition]}


@dataclass
class Claim:
    """A ResourceClaim the test allocates by hand through the status subresource."""

    cluster: Cluster
    namespace: str
    name: str
    driver: str

    @property
    def _api(self) -> Any:
        return self.cluster.kind(RESOURCE_API, "ResourceClaim")

    def get(self) -> dict[str, Any]:
        return self._api.get(name=self.name, namespace=self.namespace).to_dict()

    def status(self) -> dict[str, Any]:
        """The stored status, read afresh."""
        return self.get().get("status") or {}

    def patch_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch status (null removes a field) and return the stored status."""
        patched = self._api.status.patch(
            name=self.name, namespace=self.namespace, body={"status": status}, content_type=MERGE_PATCH
        )
        return patched.to_dict().get("status") or {}

    def replace_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """Update with the whole status as given (no merging) and return the stored status."""
        body = {**self.get(), "status": status}
        return self._api.status.replace(body=body, namespace=self.namespace).to_dict().get("status") or {}


@pytest.fixture
def claim(cluster: Cluster, objects: ObjectTracker, namespace: str) -> Claim:
    driver = unique_driver("api")
    name = objects.create(resource_claim("claim", driver), namespace).metadata.name
    return Claim(cluster, namespace, name, driver)


@dataclass
class Target:
    """Where binding conditions are written: `submit(fields)` stores them and returns the stored device/result."""

    prefix: str
    submit: Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(params=["slice", "allocation"])
def target(request: pytest.FixtureRequest, objects: ObjectTracker) -> Target:
    if request.param == "slice":
        driver = unique_driver("api")

        def publish(fields: dict[str, Any]) -> dict[str, Any]:
            return objects.create(fabric_slice(driver, **fields)).to_dict()["spec"]["devices"][0]

        return Target("spec.devices[0]", publish)
    claim: Claim = request.getfixturevalue("claim")  # only this variant needs a namespace

    def allocate(fields: dict[str, Any]) -> dict[str, Any]:
        status = claim.patch_status({"allocation": allocation(claim.driver, **fields)})
        return status["allocation"]["devices"]["results"][0]

    return Target(RESULTS, allocate)


@dataclass(frozen=True)
class Invalid:
    fields: dict[str, list[str]]
    field: str  # below the device / the allocation result
    reason: str


SET_TOGETHER = {
    "binding-without-failure": Invalid({BINDING: [ATTACHED]}, FAILURE, "required to use bindingConditions"),
    "failure-without-binding": Invalid({FAILURE: [FAILED]}, BINDING, "required to use bindingFailureConditions"),
}
WELL_FORMED = {
    "overlap": Invalid({BINDING: [ATTACHED], FAILURE: [FAILED, ATTACHED]}, f"{FAILURE}[1]", "must not overlap"),
    "duplicate-binding": Invalid({BINDING: [ATTACHED, ATTACHED], FAILURE: [FAILED]}, f"{BINDING}[1]", "Duplicate"),
    "duplicate-failure": Invalid({BINDING: [ATTACHED], FAILURE: [FAILED, FAILED]}, f"{FAILURE}[1]", "Duplicate"),
    "not-a-name": Invalid({BINDING: ["Not A Name!"], FAILURE: [FAILED]}, f"{BINDING}[0]", "must consist of"),
    "upper-with-space": Invalid({BINDING: [ATTACHED], FAILURE: ["Attach Failed"]}, f"{FAILURE}[0]", "must consist of"),
    "name-too-long": Invalid({BINDING: ["x" * 64], FAILURE: [FAILED]}, f"{BINDING}[0]", "no more than 63"),
    "prefix-not-dns": Invalid({BINDING: ["Fabric_Example/attached"], FAILURE: [FAILED]}, f"{BINDING}[0]", "prefix"),
}


def _expect_rejected(target: Target, case: Invalid) -> None:
    expect_invalid(lambda: target.submit(case.fields), f"{target.prefix}.{case.field}", case.reason)


@pytest.mark.requirement("API-3")
@pytest.mark.parametrize("case", SET_TOGETHER.values(), ids=SET_TOGETHER.keys())
def test_binding_and_failure_conditions_are_set_together(target: Target, case: Invalid) -> None:
    _expect_rejected(target, case)


@pytest.mark.requirement("API-4")
@pytest.mark.parametrize("case", WELL_FORMED.values(), ids=WELL_FORMED.keys())
def test_malformed_condition_lists_are_rejected(target: Target, case: Invalid) -> None:
    _expect_rejected(target, case)


@pytest.mark.requirement("API-4")
def test_qualified_condition_names_are_accepted(target: Target) -> None:
    fields = {BINDING: [ATTACHED, "ready"], FAILURE: [FAILED, "fabric.example.com/reschedule"]}
    stored = target.submit(fields)
    assert {key: stored.get(key) for key in fields} == fields, f"valid condition names not kept as sent: {stored}"


@pytest.mark.requirement("API-5")
@pytest.mark.parametrize("allocated", [None, "fabric-gpu-0"], ids=["claim-not-allocated", "other-device-allocated"])
def test_status_of_a_device_not_in_the_allocation_is_rejected(claim: Claim, allocated: str | None) -> None:
    if allocated:
        claim.patch_status({"allocation": allocation(claim.driver, dev=allocated)})
    entry = device_status(claim.driver, "fabric-gpu-1")
    expect_invalid(lambda: claim.patch_status({"devices": [entry]}), "status.devices[0]", "must be an allocated device")
    assert not claim.status().get("devices"), "a rejected status.devices entry was stored"


@pytest.mark.requirement("API-5")
def test_status_of_an_allocated_device_is_accepted(claim: Claim) -> None:
    claim.patch_status({"allocation": allocation(claim.driver)})
    entry = device_status(claim.driver, "fabric-gpu-0")
    stored = claim.patch_status({"devices": [entry]})
    assert stored.get("devices") == [entry], f"status.devices not stored as sent: {stored.get('devices')}"


def _clear_by_merge_patch(claim: Claim, status: dict[str, Any]) -> dict[str, Any]:
    return claim.patch_status({"allocation": None})


def _clear_by_update_keeping_entries(claim: Claim, status: dict[str, Any]) -> dict[str, Any]:
    return claim.replace_status({key: value for key, value in status.items() if key != "allocation"})


@pytest.mark.requirement("API-5")
@pytest.mark.parametrize(
    "clear", [_clear_by_merge_patch, _clear_by_update_keeping_entries], ids=["merge-patch", "update-sends-entries"]
)
def test_deallocation_drops_the_status_of_its_devices(
    claim: Claim, clear: Callable[[Claim, dict[str, Any]], dict[str, Any]]
) -> None:
    claim.patch_status({"allocation": allocation(claim.driver)})
    status = claim.patch_status({"devices": [device_status(claim.driver, "fabric-gpu-0")]})
    assert status.get("devices"), f"precondition: the entry of the allocated device was not stored: {status}"
    # The request itself leaves status.devices alone (or even sends it back): the server is what drops it.
    after = clear(claim, status)
    assert "allocation" not in after, f"allocation not cleared: {after}"
    assert not after.get("devices"), f"status.devices of the deallocated device kept: {after.get('devices')}"
    assert not claim.status().get("devices"), "status.devices back after a fresh read"


@pytest.mark.requirement("API-6")
@pytest.mark.parametrize(
    "change",
    [{"dev": "fabric-gpu-1"}, {"pool": "fabric-1"}, {"node": "node-b"}],
    ids=["device", "pool", "nodeSelector"],
)
def test_allocation_cannot_be_edited_in_place(claim: Claim, change: dict[str, str]) -> None:
    before = claim.patch_status({"allocation": allocation(claim.driver)})["allocation"]
    edited = allocation(claim.driver, **change)
    expect_invalid(lambda: claim.patch_status({"allocation": edited}), "status.allocation", *IMMUTABLE)
    assert claim.status().get("allocation") == before, "a rejected edit changed the stored allocation"


@pytest.mark.requirement("API-6")
def test_allocation_can_be_cleared_and_set_again(claim: Claim) -> None:
    claim.patch_status({"allocation": allocation(claim.driver)})
    assert "allocation" not in claim.patch_status({"allocation": None}), "allocation could not be cleared"
    other = allocation(claim.driver, dev="fabric-gpu-1", pool="fabric-1", node="node-b")
    results = claim.patch_status({"allocation": other})["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [("fabric-1", "fabric-gpu-1")], results
