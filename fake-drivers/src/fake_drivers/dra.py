"""DRA object pieces every component of the reference stack builds the same way (resource.k8s.io/v1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
MANAGED_BY = "app.kubernetes.io/managed-by"
IDENTITY_ATTRIBUTE = "uuid"


@dataclass(frozen=True)
class Device:
    """A device as a driver publishes it: name in its pool, physical identity, model, other attributes."""

    name: str
    uuid: str
    model: str
    attributes: dict[str, Any]

    def entry(self) -> dict[str, Any]:
        """The ResourceSlice device entry."""
        return {"name": self.name, "attributes": device_attributes(self.uuid, self.model, self.attributes)}


def typed_attribute(value: bool | int | str) -> dict[str, Any]:
    """A DeviceAttribute: exactly one of bool/int/string (bool first: bool is an int in Python)."""
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def device_attributes(uuid: str, model: str, extra: dict[str, bool | int | str]) -> dict[str, Any]:
    """Identity and model first, so one DeviceClass/CEL selector matches node-local and fabric copies alike."""
    return {
        **{k: typed_attribute(v) for k, v in extra.items()},
        IDENTITY_ATTRIBUTE: {"string": uuid},
        "model": {"string": model},
    }


def slice_name(driver: str, pool: str) -> str:
    """ResourceSlice name for a driver's pool, e.g. gpu-fabric-example-com-node-0."""
    return f"{driver.replace('.', '-').replace('/', '-')}-{pool}"[:253]


def identity(device: dict[str, Any]) -> str | None:
    """The physical identity of a published device, or None if it has none."""
    return device.get("attributes", {}).get(IDENTITY_ATTRIBUTE, {}).get("string")


# Versions of resource.k8s.io that serve DeviceTaintRule, newest first: v1 from 1.37, v1beta2 on 1.36 and
# v1alpha3 on 1.34/1.35 (both only with --runtime-config).
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")


def served_version(api: Any, plural: str, versions: tuple[str, ...] = TAINT_RULE_VERSIONS) -> str:
    """The newest version of resource.k8s.io in `versions` whose discovery lists `plural`."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api)
    for version in versions:
        try:
            listed = custom.get_api_resources(RESOURCE_GROUP, version)
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise
        if any(r.name == plural for r in listed.resources):
            return version
    raise LookupError(f"the cluster serves {plural} in none of {RESOURCE_GROUP} {list(versions)}")
