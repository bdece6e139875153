"""Create objects from plain manifests and remove them again, newest first, ignoring only "not found".

Every object the suite creates carries the run label, so a leak check (and a human) can find leftovers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.cluster.client import Cluster

RUN_LABEL = "conformance.dra.example.com/run"


@dataclass
class ObjectTracker:
    cluster: Cluster
    run_id: str
    created: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def create(self, manifest: dict[str, Any], namespace: str | None = None) -> Any:
        """Create `manifest` (validated by the real apiserver) and remember it for cleanup."""
        body = copy.deepcopy(manifest)
        meta = body.setdefault("metadata", {})
        meta.setdefault("labels", {})[RUN_LABEL] = self.run_id
        resource = self.cluster.kind(body["apiVersion"], body["kind"])
        ns = (namespace or meta.get("namespace")) if resource.namespaced else None
        obj = resource.create(body=body, namespace=ns)
        self.created.append((body["apiVersion"], body["kind"], obj.metadata.name, ns))
        return obj

    def cleanup(self) -> list[str]:
        """Delete everything created, newest first; return what could not be deleted."""
        failures = []
        while self.created:
            api_version, kind, name, ns = self.created.pop()
            try:
                self.cluster.kind(api_version, kind).delete(name=name, namespace=ns)
            except ApiException as exc:
                if exc.status != 404:
                    failures.append(f"{kind} {ns + '/' if ns else ''}{name}: {exc.status} {exc.reason}")
        return failures
