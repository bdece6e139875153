"""The outcome of a bound pod is read once the claim stream has delivered the allocation the pod was bound with: the
pod and the claim streams are two watches, and under load the bind can arrive first (a hand-fed record, no watches)."""

from __future__ import annotations

from typing import Any

from conformance.observe.recorder import Record, Recorder
from conformance.observe.views import History
from conformance.suite.implementation.outcome import _allocated_at_bind

DRIVER = "gpu.example.com"


def _claim(rv: int, pool: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if pool:
        result = {"driver": DRIVER, "pool": pool, "device": "d0", "request": "r"}
        status["allocation"] = {"allocationTimestamp": f"t{rv}", "devices": {"results": [result]}}
    return {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": str(rv)}, "status": status}


def _pod(rv: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(rv)},
        "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]},
    }


def _add(rec: Recorder, at: float, kind: str, obj: dict[str, Any]) -> None:
    rv = int(obj["metadata"]["resourceVersion"])
    rec.records.append(Record(len(rec.records), at, kind, "MODIFIED", "ns", obj["metadata"]["name"], rv, obj))


def test_a_bind_delivered_before_its_reallocation_waits_for_it() -> None:
    rec = Recorder(None, "r", "uuid")
    history = History(rec, "ns")
    _add(rec, 1.0, "claim", _claim(10, "fabric"))  # the fabric allocation
    _add(rec, 2.0, "claim", _claim(12, None))  # cleared (reschedule to the node-local copy)
    _add(rec, 3.0, "pod", _pod(15))  # the bind, delivered before the reallocation at revision 13
    assert history.binding() is not None
    assert not _allocated_at_bind(history)
    _add(rec, 3.5, "claim", _claim(13, "n1-local"))  # the claim stream catches up
    assert _allocated_at_bind(history)
