"""Kube.write_condition's cached path: one request per write when the watch cache's copy is current, a fresh read
after a 409. The API is faked here (a recorder of calls that answers with canned objects): what is tested is which
requests the controller makes, not the apiserver; tests/controller/test_rbac.py writes through a real one."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fake_drivers.controller.decide import ConditionWrite
from fake_drivers.controller.kube import Kube
from fake_drivers.controller.model import Claim
from fake_drivers.controller.settings import Settings

SETTINGS = Settings(driver="gpu.example.com")


def _claim(version: str) -> dict[str, Any]:
    result = {"request": "r", "driver": SETTINGS.driver, "pool": "fabric-0", "device": "dev-0"}
    result |= {"bindingConditions": [SETTINGS.attached], "bindingFailureConditions": [SETTINGS.attach_failed]}
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}
    allocation = {"devices": {"results": [result]}, "nodeSelector": selector}
    meta = {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": version}
    return {"metadata": meta, "status": {"allocation": allocation}}


class FakeApi:
    def __init__(self, current: dict[str, Any], conflict_once: bool = False) -> None:
        self.current, self.conflict_once, self.calls = current, conflict_once, []

    def get_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        self.calls.append("get")
        return copy.deepcopy(self.current)

    def replace_namespaced_custom_object_status(self, *args: Any) -> dict[str, Any]:
        body = args[-1]
        self.calls.append(f"put@{body['metadata']['resourceVersion']}")
        if self.conflict_once or body["metadata"]["resourceVersion"] != self.current["metadata"]["resourceVersion"]:
            self.conflict_once = False
            raise ApiException(status=409, reason="Conflict")
        return body


def _kube(api: FakeApi) -> Kube:
    kube = Kube(client.ApiClient(), SETTINGS)
    kube.api = api  # type: ignore[assignment]
    return kube


def _write(obj: dict[str, Any]) -> ConditionWrite:
    claim = Claim.from_api(obj)
    return ConditionWrite(claim, claim.results[0], SETTINGS.attached, "Attached", "attached")


def test_a_current_cached_claim_is_written_in_one_request() -> None:
    api = FakeApi(_claim("7"))
    assert _kube(api).write_condition(_write(_claim("7")), 0, cached=_claim("7")) == "written"
    assert api.calls == ["put@7"]


def test_a_conflict_on_the_cached_copy_reads_fresh_and_checks_again() -> None:
    api = FakeApi(_claim("9"), conflict_once=True)  # changed since the cache's copy (a status write of another)
    assert _kube(api).write_condition(_write(_claim("7")), 0, cached=_claim("7")) == "written"
    assert api.calls == ["put@7", "get", "put@9"]


def test_an_allocation_gone_from_the_fresh_read_is_stale() -> None:
    gone = _claim("9")
    gone["status"] = {}
    api = FakeApi(gone, conflict_once=True)
    assert _kube(api).write_condition(_write(_claim("7")), 0, cached=_claim("7")) == "stale"
    assert api.calls == ["put@7", "get"]
