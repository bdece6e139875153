"""kube-apiserver keeps and validates the KEP-5007 fields of ResourceSlice devices.

With the DRADeviceBindingConditions gate off the server silently drops these fields, so the round trip
fails there: that is what makes API-1 a check of the gate, not only of the schema.
"""

from __future__ import annotations

import pytest

from conformance.cluster.client import Cluster
from conformance.cluster.manifests import unique_driver
from conformance.cluster.objects import ObjectTracker
from conformance.suite.cluster.apichecks import BINDING, FAILURE, expect_invalid, fabric_slice


@pytest.mark.requirement("API-1")
def test_slice_binding_fields_round_trip(cluster: Cluster, objects: ObjectTracker) -> None:
    driver = unique_driver("api")
    fields = {
        "bindsToNode": True,
        BINDING: [f"{driver}/attached", f"{driver}/healthy"],
        FAILURE: [f"{driver}/attach-failed", f"{driver}/reschedule"],
    }
    created = objects.create(fabric_slice(driver, **fields))
    stored = cluster.kind("resource.k8s.io/v1", "ResourceSlice").get(name=created.metadata.name).to_dict()
    got = stored["spec"]["devices"][0]
    assert {key: got.get(key) for key in fields} == fields, (
        f"the apiserver did not keep the binding fields (gate DRADeviceBindingConditions off?): {got}"
    )


@pytest.mark.requirement("API-2")
def test_slice_with_five_binding_conditions_is_rejected(objects: ObjectTracker) -> None:
    driver = unique_driver("api")
    too_many = [f"{driver}/c{i}" for i in range(5)]
    manifest = fabric_slice(driver, bindsToNode=True, **{BINDING: too_many, FAILURE: [f"{driver}/failed"]})
    expect_invalid(lambda: objects.create(manifest), f"spec.devices[0].{BINDING}", "must have at most 4 items")
