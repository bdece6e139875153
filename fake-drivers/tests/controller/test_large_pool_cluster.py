"""Large fabric pools against a real cluster: a pool past 128 devices is published as several slices that the
kube-apiserver accepts and that shrink with the pool; 200 claims are attached in parallel. Each test prints the
times it measured (run with -s to see them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from conformance.cluster.objects import ObjectTracker
from conformance.cluster.waits import wait_for
from controller_harness import (
    ControllerProcess,
    G,
    InvariantWatcher,
    V,
    claims,
    device_conditions,
    driver_slices,
    results,
)
from kubernetes import client

from fake_drivers.pools import pool_problem


def one_fabric(count: int) -> dict[str, Any]:
    devices = [{"model": "fake-gpu", "count": count, "attributes": {"vendor": "example.com"}}]
    return {"fabrics": [{"id": "fabric-0", "nodes": ["node-0", "node-2"], "devices": devices}]}


def pool_slices(api: client.CustomObjectsApi, driver: str) -> list[dict[str, Any]]:
    return [s for s in driver_slices(api, driver) if s["spec"]["pool"]["name"] == "fabric-0"]


def wait_pool(api: client.CustomObjectsApi, driver: str, names: list[str], timeout: float) -> list[dict[str, Any]]:
    return wait_for(
        lambda: pool_slices(api, driver),
        lambda slices: not pool_problem(slices, names),
        timeout=timeout,
        expected=f"pool fabric-0 published with exactly {len(names)} devices",
        describe=lambda slices: pool_problem(slices or [], names),
    )


@pytest.mark.parametrize("fabric_spec", [one_fabric(300)])
def test_a_fabric_of_300_devices_is_published_in_three_slices_and_shrinks_to_two(
    api: client.CustomObjectsApi,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    start_controller: Callable[..., ControllerProcess],
) -> None:
    names = sorted(fabric_names)
    started = time.monotonic()
    # reschedule-to-local lists only free devices: attaching some is how the pool shrinks. A long idle grace
    # keeps them attached (nobody holds them) for the length of the test.
    controller = start_controller("--mode", "reschedule-to-local", "--idle-grace", "600")
    slices = wait_pool(api, driver, names, timeout=60)
    print(f"\n300 devices published in {time.monotonic() - started:.2f} s (controller start to complete pool)")
    [generation] = {s["spec"]["pool"]["generation"] for s in slices}
    assert all(s["spec"]["devices"][0]["bindsToNode"] for s in slices)
    assert len({str(s["spec"]["nodeSelector"]) for s in slices}) == 1

    with InvariantWatcher(api, driver, fabric_names, interval=0.2) as invariants:
        taken = names[:60]  # 240 free devices left: two slices; the third one must go
        with ThreadPoolExecutor(20) as workers:
            answers = list(
                workers.map(
                    lambda n: fabric_http.post(f"/v1/devices/{fabric_names[n]}/attach", json={"node": "node-0"}), taken
                )
            )
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200]
        shrunk = wait_pool(api, driver, names[60:], timeout=60)
    # The attaches complete over about a second, so the pool may go through several generations on the way.
    [final] = {s["spec"]["pool"]["generation"] for s in shrunk}
    assert final > generation
    assert not invariants.violations, invariants.violations
    assert invariants.observations > 0
    assert "publish pool" not in controller.output(), "a slice write was refused"


def attaching(http: httpx.Client) -> int:
    return sum(m["attaching"] for f in http.get("/v1/fabrics").json()["fabrics"] for m in f["models"].values())


def allocate(api: client.CustomObjectsApi, namespace: str, name: str, driver: str, device: str, node: str) -> None:
    """Write the allocation as the scheduler's PreBind does, so the controller's pace is measured alone."""
    claim = api.get_namespaced_custom_object(G, V, namespace, "resourceclaims", name)
    result = {
        "request": "gpu",
        "driver": driver,
        "pool": "fabric-0",
        "device": device,
        "bindingConditions": [f"{driver}/attached"],
        "bindingFailureConditions": [f"{driver}/attach-failed", f"{driver}/reschedule"],
    }
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    claim["status"] = {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [term]}}}
    api.replace_namespaced_custom_object_status(G, V, namespace, "resourceclaims", name, claim)


def attached_claims(api: client.CustomObjectsApi, namespace: str, driver: str) -> int:
    return sum(
        1
        for c in claims(api, namespace)
        for r in results(c)
        if device_conditions(c, r).get(f"{driver}/attached", {}).get("status") == "True"
    )


CLAIMS = 200
WORKERS = 32  # --attach-workers here: 200 claims written over ~5 s cannot keep the default (128) all busy


@pytest.mark.parametrize(("fabric_spec", "fabric_attach_seconds"), [(one_fabric(1000), 1.0)])
def test_1000_devices_are_published_and_200_claims_are_attached_in_parallel(
    api: client.CustomObjectsApi,
    objects: ObjectTracker,
    namespace: str,
    driver: str,
    fabric_http: httpx.Client,
    fabric_names: dict[str, str],
    fabric_class: str,
    start_controller: Callable[..., ControllerProcess],
) -> None:
    started = time.monotonic()
    start_controller("--mode", "keep-in-pool", "--attach-workers", str(WORKERS))
    wait_pool(api, driver, sorted(fabric_names), timeout=120)
    published_s = time.monotonic() - started

    names = [f"c-{i:03d}" for i in range(CLAIMS)]
    request = {"name": "gpu", "exactly": {"deviceClassName": fabric_class}}
    for name in names:
        manifest = {"apiVersion": f"{G}/{V}", "kind": "ResourceClaim", "metadata": {"name": name}}
        objects.create({**manifest, "spec": {"devices": {"requests": [request]}}}, namespace)

    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], attaching(fabric_http))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        first = time.monotonic()
        with ThreadPoolExecutor(8) as writers:
            list(
                writers.map(
                    lambda i: allocate(
                        api, namespace, names[i], driver, f"fabric-0-fake-gpu-{i}", ("node-0", "node-2")[i % 2]
                    ),
                    range(CLAIMS),
                )
            )
        written_s = time.monotonic() - first
        wait_for(
            lambda: attached_claims(api, namespace, driver),
            lambda n: n == CLAIMS,
            timeout=180,
            expected=f"all {CLAIMS} claims with {driver}/attached=True",
            describe=lambda n: f"{n} attached",
        )
        attached_s = time.monotonic() - first
    finally:
        done.set()
        sampler.join(5)
    print(
        f"\n1000 devices published in {published_s:.2f} s; {CLAIMS} allocations written in {written_s:.2f} s; "
        f"all {CLAIMS} attached (1.0 s each) and reported {attached_s:.2f} s after the first allocation; "
        f"peak attaches in flight {peak[0]} (workers {WORKERS})"
    )
    assert peak[0] <= WORKERS, f"{peak[0]} attaches at once with {WORKERS} workers"
    assert peak[0] >= WORKERS * 3 // 4, f"attaches did not run in parallel: peak {peak[0]}"
