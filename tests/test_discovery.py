"""API discovery per cluster. The apiserver is faked: a small HTTP server answering the discovery paths only, so that
two "clusters" can serve different versions on the same port one after the other, as local clusters do."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from conformance.cluster.discovery import fresh_dynamic


def _discovery(version: str) -> dict[str, Any]:
    """What an apiserver serving DeviceTaintRule at resource.k8s.io/`version` (only) answers."""
    served = {"groupVersion": f"resource.k8s.io/{version}", "version": version}
    group = {"name": "resource.k8s.io", "versions": [served], "preferredVersion": served}
    rule = {"name": "devicetaintrules", "singularName": "devicetaintrule", "namespaced": False,
            "kind": "DeviceTaintRule", "verbs": ["get", "list", "watch"]}  # fmt: skip
    return {
        "/version": {"major": "1", "minor": "37", "gitVersion": "v1.37.2"},
        "/api": {"kind": "APIVersions", "versions": ["v1"]},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
        "/apis": {"kind": "APIGroupList", "groups": [group]},
        f"/apis/resource.k8s.io/{version}": {
            "kind": "APIResourceList",
            "groupVersion": f"resource.k8s.io/{version}",
            "resources": [rule],
        },
    }


@contextmanager
def _server(port: int, version: str) -> Iterator[None]:
    paths = _discovery(version)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = paths.get(self.path.split("?")[0])
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body or {"kind": "Status", "code": 404}).encode())

        def log_message(self, *_args: Any) -> None:
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(port: int) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    return client.ApiClient(cfg)


def _taint_rule_versions(dynamic: DynamicClient) -> list[str]:
    return [r.api_version for r in dynamic.resources.search(group="resource.k8s.io", kind="DeviceTaintRule")]


def test_a_cluster_on_a_port_another_used_is_asked_for_its_own_versions(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # the library's shared cache goes here, not in /tmp
    port = _free_port()
    with _server(port, "v1"):  # an earlier cluster (say 1.38) on this port
        assert _taint_rule_versions(DynamicClient(_api(port))) == ["v1"]
    with _server(port, "v1alpha3"):  # this run's cluster, same port
        # What the library's default does (the CI failure): the earlier cluster's version, 404 on this one.
        assert _taint_rule_versions(DynamicClient(_api(port))) == ["v1"]
        assert _taint_rule_versions(fresh_dynamic(_api(port))) == ["v1alpha3"]
    assert [p.name for p in tmp_path.iterdir()] == [f.name for f in tmp_path.glob("osrcp-*.json")]  # ours wrote none
