"""Hand-made watch events of one claim fed to a real Recorder (a fake of the API, said so here), for the tests of the
record's story of a failed scenario (test_story.py, test_cause.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from conformance.observe.recorder import Recorder

NS = "attach-before-bind-x1"
T0 = 1_800_000_000.0
READY = "FabricDeviceReady"


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim(rv: int, allocated_at: float | None, *, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "app-gpu-1", "namespace": NS, "resourceVersion": str(rv), "managedFields": []}
    obj: dict[str, Any] = {"metadata": meta, "status": {}}
    if allocated_at is not None:
        selector = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
        }
        result = {"driver": "d", "pool": "fabric", "device": "f1", "request": "r", "bindingConditions": [READY]}
        result["bindingFailureConditions"] = ["FabricDeviceFailed"]
        obj["status"]["allocation"] = {
            "devices": {"results": [result]},
            "nodeSelector": selector,
            "allocationTimestamp": stamp(allocated_at),
        }
        meta["managedFields"].append({"manager": "kube-scheduler", "subresource": "status", "fieldsV1": {}})
    if conditions is not None:
        obj["status"]["devices"] = [{"driver": "d", "pool": "fabric", "device": "f1", "conditions": conditions}]
        meta["managedFields"].append(
            {
                "manager": "reference-controller",
                "subresource": "status",
                "time": "2026-12-07T00:41:07Z",
                "fieldsV1": {"f:status": {"f:devices": {}}},
            }
        )
    return obj


def record_of(events: list[tuple[float, dict[str, Any]]], kind: str = "claim") -> Recorder:
    record = Recorder(None, "run")
    for at, obj in events:
        record.feed(kind, "MODIFIED", obj)
        record.records[-1] = replace(record.records[-1], at=at)
    return record
