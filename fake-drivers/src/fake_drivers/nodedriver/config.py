"""Which nodes the driver serves and which local (non-fabric) devices each has."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StrictInt, field_validator

from ..dra import Device
from ..validation import (
    DNS_SUBDOMAIN,
    DeviceGroup,
    Strict,
    check_dns_label,
    check_node_name,
    read_yaml,
    validate,
)

DEFAULT_DRIVER = "gpu.fabric.example.com"
LOCAL_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "fake-node-driver.dra.example.com")


class LocalGroup(DeviceGroup):
    count: Annotated[StrictInt, Field(ge=0, le=1000)] = 1


class NodeConfig(Strict):
    local: list[LocalGroup] = Field(default_factory=list)


class FileConfig(Strict):
    driver: str = DEFAULT_DRIVER
    nodes: dict[str, NodeConfig] = Field(min_length=1)

    @field_validator("driver")
    @classmethod
    def _driver(cls, value: str) -> str:
        if len(value) > 63 or not DNS_SUBDOMAIN.match(value):
            raise ValueError(f"driver {value!r} must be a DNS subdomain of at most 63 characters")
        return value

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, value: dict[str, NodeConfig]) -> dict[str, NodeConfig]:
        for node in value:
            check_node_name(node)
        return value


@dataclass(frozen=True)
class NodeDriverConfig:
    driver: str
    local: dict[str, tuple[Device, ...]]  # node -> its local devices

    @property
    def nodes(self) -> list[str]:
        return sorted(self.local)


def build_config(raw: Any) -> NodeDriverConfig:
    parsed = validate(FileConfig, raw, "node driver config")
    local: dict[str, tuple[Device, ...]] = {}
    for node, cfg in parsed.nodes.items():
        devices = []
        for group in cfg.local:
            for index in range(group.count):
                name = check_dns_label(f"local-{group.model}-{index}", "local device name")
                ident = str(uuid.uuid5(LOCAL_UUID_NAMESPACE, f"{node}/{group.model}/{index}"))
                devices.append(Device(name, ident, group.model, dict(group.attributes)))
        local[node] = tuple(devices)
    return NodeDriverConfig(driver=parsed.driver, local=local)


def load_config(path: str | Path) -> NodeDriverConfig:
    return build_config(read_yaml(path, "node driver config"))
