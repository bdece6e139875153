"""The handle the tests get: API clients for a running cluster plus what the provider knows about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from conformance.cluster.discovery import fresh_dynamic
from conformance.cluster.providers.base import ClusterInfo

USER_AGENT = "dra-binding-conditions-conformance"


@dataclass
class Cluster:
    info: ClusterInfo
    user_agent: str = USER_AGENT
    _api: client.ApiClient | None = field(default=None, init=False, repr=False)

    @property
    def api(self) -> client.ApiClient:
        if self._api is None:
            cfg = client.Configuration()
            config.load_kube_config(config_file=str(self.info.kubeconfig), client_configuration=cfg)
            self._api = client.ApiClient(cfg)
            self._api.user_agent = self.user_agent
        return self._api

    @cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @cached_property
    def resource(self) -> client.ResourceV1Api:
        return client.ResourceV1Api(self.api)

    @cached_property
    def dynamic(self) -> DynamicClient:
        """Any kind from plain dicts, validated by the real apiserver (no client-side models in the way)."""
        return fresh_dynamic(self.api)

    def kind(self, api_version: str, kind: str) -> Any:
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def raw_get(self, path: str) -> str:
        """GET a non-resource path (/readyz, /metrics) with the cluster's credentials."""
        method, url, headers, _, _ = self.api.param_serialize("GET", path, auth_settings=["BearerToken"])
        response = self.api.call_api(method, url, headers)
        response.read()
        if response.status != 200:
            raise ApiException(status=response.status, reason=response.reason)
        return response.data.decode()

    def server_version(self) -> str:
        return client.VersionApi(self.api).get_code().git_version

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
