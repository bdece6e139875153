"""The profile's manifests: applied in order before the hooks and processes (a CRD waited for until Established),
deleted after they stop; an object the harness did not create is left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from conformance.cluster.discovery import fresh_dynamic
from conformance.cluster.waits import wait_for
from conformance.implementation.harness.resolve import Resolving
from conformance.implementation.harness.state import ImplementationFailed
from conformance.implementation.profile import ProfileError


class Manifests(Resolving):
    """Applying and deleting the profile's manifests."""

    def _apply_manifests(self) -> None:
        if not self.loaded.profile.manifests:
            return  # no API discovery for a profile without manifests
        dynamic = fresh_dynamic(self._api())
        for entry in self.loaded.profile.manifests:
            path = Path(self.resolve(entry))
            try:
                docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
            except (OSError, yaml.YAMLError) as exc:
                raise ProfileError(f"profile {self.loaded.path}: manifest {path}: {exc}") from None
            for doc in docs:
                try:
                    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
                except ResourceNotFoundError:
                    raise ProfileError(
                        f"profile {self.loaded.path}: manifest {path}: the cluster serves no {doc['kind']} in "
                        f"{doc['apiVersion']} (a CustomResourceDefinition for it must come before it, in order)"
                    ) from None
                ns = doc["metadata"].get("namespace") if resource.namespaced else None
                if self._create(resource, doc, ns):
                    self.applied.append((resource, doc["metadata"]["name"], ns))
                if doc["kind"] == "CustomResourceDefinition":
                    self._wait_established(resource, doc["metadata"]["name"])
                    dynamic = fresh_dynamic(self._api())  # the objects that follow may be of its kind
        if self.applied:
            self.progress(f"applied {len(self.applied)} objects from {len(self.loaded.profile.manifests)} manifests")

    def _wait_established(self, resource: Any, name: str) -> None:
        """A CRD's custom objects can be created once it is Established (its API is served)."""

        def established(crd: Any) -> bool:
            conditions = (crd.status or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_for(
            lambda: resource.get(name=name),
            established,
            timeout=60.0,
            expected=f"CustomResourceDefinition {name} to be Established",
            describe=lambda crd: f"conditions: {(crd.status or {}).get('conditions') if crd else None}",
        )

    def _create(self, resource: Any, doc: dict[str, Any], ns: str | None) -> bool:
        """Create one manifest object; True if the harness made it (and so deletes it at the end).

        An object still being deleted (a namespace of the previous run finalizing) is waited out; one that
        exists and is not being deleted belongs to someone else and is left alone.
        """
        name = doc["metadata"]["name"]

        def attempt() -> str:
            try:
                resource.create(body=doc, namespace=ns)
                return "created"
            except ApiException as exc:
                if exc.status != 409:
                    raise ImplementationFailed(
                        f"cannot create {doc['kind']} {name}: {exc.status} {exc.reason}"
                    ) from None
            current = resource.get(name=name, namespace=ns)
            return "deleting" if current.metadata.deletionTimestamp else "exists"

        outcome = wait_for(
            attempt,
            lambda o: o != "deleting",
            timeout=60.0,
            expected=f"{doc['kind']} {name} of an earlier run to finish deleting",
        )
        return outcome == "created"

    def _delete_manifests(self) -> list[str]:
        problems = []
        while self.applied:
            resource, name, ns = self.applied.pop()
            try:
                resource.delete(name=name, namespace=ns)
            except ApiException as exc:
                if exc.status != 404:
                    problems.append(f"cannot delete {resource.kind} {name}: {exc.status} {exc.reason}")
        return problems
