"""Starting the implementation: manifests, setup hooks, node hooks, processes in profile order until each is
ready, then its endpoints registered and the nodes followed; a failure stops what was started."""

from __future__ import annotations

import atexit
from typing import Any

from conformance.implementation import endpoints
from conformance.implementation.harness.nodes import Nodes
from conformance.implementation.profile import (
    PLACEHOLDER,
    ProfileError,
)


class Starting(Nodes):
    """The start of the run."""

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        prof = self.loaded.profile
        atexit.register(self._kill_all)
        try:
            self._apply_manifests()
            for hook in prof.hooks.setup:
                self._run_once(hook.name, hook.command, hook.env, hook.timeout_s, "setup")
            since = self._list_nodes() if self.follows_nodes else None
            for node in sorted(self._nodes):
                self._node_hooks(node)
            for spec in prof.processes:
                for node in sorted(self._nodes) if spec.per_node else [None]:
                    self._start(spec, node)
            for endpoint in (prof.fabric_probe, prof.fault_injector, prof.readiness_probe):
                if endpoint is not None:
                    url = self.resolve(endpoint.url)
                    if not url.startswith(("http://", "https://")):
                        raise ProfileError(f"profile {self.loaded.path}: {endpoint.url} is {url!r}, not an http(s) URL")
                    self._registered.append(url)
                    endpoints.register(url, self._endpoint_ca(endpoint.url, endpoint.ca_file), self._token(endpoint))
            if since is not None:
                self._follow_nodes(since)
        except BaseException:
            self.stop()
            raise

    def _token(self, endpoint: Any) -> str | None:
        return self.resolve(endpoint.token) if endpoint.token else None

    def _endpoint_ca(self, url: str, ca_file: str | None) -> str | None:
        """The endpoint's own CA; else the run's CA for {https_url:NAME} of a process the harness made a certificate
        for (tls: true); else None (the system's CAs)."""
        if ca_file:
            return self.resolve(ca_file)
        tls = {p.name for p in self.loaded.profile.processes if p.tls}
        if any(m[1] == "https_url" and m[2] in tls for m in PLACEHOLDER.finditer(url)):
            return str(self.ca.ensure_ca())
        return None
