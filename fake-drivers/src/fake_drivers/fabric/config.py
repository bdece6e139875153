"""Fabric configuration: which fabrics exist, which nodes each reaches, which devices sit in its pool.

The YAML is the single source of the inventory. Device ids are derived from it (uuid5 over fabric/model/index),
so a restart, or a second manager reading the same file, gives every physical device the same id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StrictInt, field_validator

from ..validation import (
    ConfigError,
    DeviceGroup,
    Strict,
    check_dns_label,
    check_node_name,
    read_yaml,
    validate,
)

# Fixed namespace: ids must not change between releases of this package, or persisted state would be orphaned.
DEVICE_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "fake-fabric-manager.dra.example.com")

DEFAULT_OPERATION_SECONDS = 1.0


class DeviceGroupConfig(DeviceGroup):
    count: Annotated[StrictInt, Field(ge=0, le=10_000)]


class FabricSectionConfig(Strict):
    id: str
    nodes: list[str] = Field(min_length=1)
    devices: list[DeviceGroupConfig] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _fabric_id(cls, value: str) -> str:
        return check_dns_label(value, "fabric id")

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for node in value:
            check_node_name(node)
        if len(set(value)) != len(value):
            raise ValueError("node names must be unique within a fabric")
        return value

    @field_validator("devices")
    @classmethod
    def _unique_models(cls, value: list[DeviceGroupConfig]) -> list[DeviceGroupConfig]:
        models = [group.model for group in value]
        if len(set(models)) != len(models):
            raise ValueError("each model may appear once per fabric (raise its count instead)")
        return value


class FileConfig(Strict):
    """The YAML document as written (camelCase keys)."""

    attach_seconds: Annotated[float, Field(alias="attachSeconds", ge=0, le=3600)] = DEFAULT_OPERATION_SECONDS
    detach_seconds: Annotated[float, Field(alias="detachSeconds", ge=0, le=3600)] = DEFAULT_OPERATION_SECONDS
    database: str | None = None
    fabrics: list[FabricSectionConfig] = Field(min_length=1)

    @field_validator("fabrics")
    @classmethod
    def _unique_fabrics(cls, value: list[FabricSectionConfig]) -> list[FabricSectionConfig]:
        ids = [fabric.id for fabric in value]
        if len(set(ids)) != len(ids):
            raise ValueError("fabric ids must be unique")
        return value


@dataclass(frozen=True)
class DeviceSpec:
    """One physical device as the configuration defines it."""

    uuid: str
    name: str
    fabric: str
    model: str
    index: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class FabricConfig:
    """Validated configuration, with the derived inventory."""

    fabrics: dict[str, tuple[str, ...]]  # fabric id -> nodes it reaches
    devices: tuple[DeviceSpec, ...]
    attach_seconds: float = DEFAULT_OPERATION_SECONDS
    detach_seconds: float = DEFAULT_OPERATION_SECONDS
    database: Path | None = None

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for nodes in self.fabrics.values() for node in nodes)


def device_uuid(fabric: str, model: str, index: int) -> str:
    return str(uuid.uuid5(DEVICE_UUID_NAMESPACE, f"{fabric}/{model}/{index}"))


def build_config(raw: Any, base_dir: Path | None = None) -> FabricConfig:
    """Validate a parsed YAML document; relative ``database`` paths are taken relative to ``base_dir``."""
    parsed = validate(FileConfig, raw, "fabric config")

    devices: list[DeviceSpec] = []
    for fabric in parsed.fabrics:
        for group in fabric.devices:
            for index in range(group.count):
                name = f"{fabric.id}-{group.model}-{index}"
                # The name doubles as a DRA device name, which is a DNS label.
                _check_name_length(name)
                devices.append(
                    DeviceSpec(
                        uuid=device_uuid(fabric.id, group.model, index),
                        name=name,
                        fabric=fabric.id,
                        model=group.model,
                        index=index,
                        attributes=dict(group.attributes),
                    )
                )

    database: Path | None = None
    if parsed.database:
        database = Path(parsed.database)
        if not database.is_absolute() and base_dir is not None:
            database = base_dir / database
    return FabricConfig(
        fabrics={fabric.id: tuple(fabric.nodes) for fabric in parsed.fabrics},
        devices=tuple(devices),
        attach_seconds=parsed.attach_seconds,
        detach_seconds=parsed.detach_seconds,
        database=database,
    )


def _check_name_length(name: str) -> None:
    if len(name) > 63:
        raise ConfigError(f"device name {name!r} is longer than 63 characters; shorten the fabric id or model")


def load_config(path: str | Path) -> FabricConfig:
    return build_config(read_yaml(path, "fabric config"), base_dir=Path(path).parent)
