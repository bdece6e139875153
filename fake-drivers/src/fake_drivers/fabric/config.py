"""Fabric configuration: which fabrics exist, which nodes each reaches, which devices sit in its pool.

The YAML is the single source of the inventory. Device ids are derived from it (uuid5 over fabric/model/index),
so a restart, or a second manager reading the same file, gives every physical device the same id.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

# Fixed namespace: ids must not change between releases of this package, or persisted state would be orphaned.
DEVICE_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "fake-fabric-manager.dra.example.com")

DEFAULT_OPERATION_SECONDS = 1.0

# Names end up in Kubernetes objects (pools, device names, node names), so they follow Kubernetes' rules.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A DRA attribute name: C identifier (max 32), optionally prefixed by a DNS subdomain and '/'.
_ATTRIBUTE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z_][A-Za-z0-9_]{0,31}$"
)

AttributeValue = StrictBool | StrictInt | StrictStr


class ConfigError(ValueError):
    """The fabric configuration is unusable; the message says where and why."""


def _check_dns_label(value: str, what: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(f"{what} {value!r} must be a DNS label (lowercase alphanumerics and '-', at most 63)")
    return value


class _Strict(BaseModel):
    # Unknown keys are errors: a typo must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceGroupConfig(_Strict):
    model: str
    count: Annotated[StrictInt, Field(ge=0, le=10_000)]
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        return _check_dns_label(value, "model")

    @field_validator("attributes")
    @classmethod
    def _attribute_names(cls, value: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        for name in value:
            if not _ATTRIBUTE_NAME.match(name):
                raise ValueError(f"attribute name {name!r} is not a DRA attribute name ([domain/]identifier)")
            if name == "uuid":
                raise ValueError("attribute 'uuid' is reserved: the fabric manager assigns it")
        return value


class FabricSectionConfig(_Strict):
    id: str
    nodes: list[str] = Field(min_length=1)
    devices: list[DeviceGroupConfig] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _fabric_id(cls, value: str) -> str:
        return _check_dns_label(value, "fabric id")

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for node in value:
            if len(node) > 253 or not _DNS_SUBDOMAIN.match(node):
                raise ValueError(f"node name {node!r} must be a DNS subdomain")
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


class FileConfig(_Strict):
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
    if not isinstance(raw, dict):
        raise ConfigError("fabric config must be a mapping with a 'fabrics' list")
    try:
        parsed = FileConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise ConfigError(f"invalid fabric config: {problems}") from None

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
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read fabric config {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"fabric config {path} is not valid YAML: {exc}") from None
    return build_config(raw, base_dir=path.parent)
