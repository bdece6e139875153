"""Validation shared by every component's configuration: Kubernetes name rules, strict models, YAML loading."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

# Names end up in Kubernetes objects (pools, device names, node names), so they follow Kubernetes' rules.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A DRA attribute name: C identifier (max 32), optionally prefixed by a DNS subdomain and '/'.
ATTRIBUTE_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z_][A-Za-z0-9_]{0,31}$"
)

AttributeValue = StrictBool | StrictInt | StrictStr

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration is unusable; the message says where and why."""


class Strict(BaseModel):
    # Unknown keys are errors: a typo must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceGroup(Strict):
    """Devices of one model with shared attributes; `uuid` and `model` are assigned, never configured."""

    model: str
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        return check_dns_label(value, "model")

    @field_validator("attributes")
    @classmethod
    def _attribute_names(cls, value: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        return check_attribute_names(value, reserved=("uuid", "model"))


def check_dns_label(value: str, what: str) -> str:
    if len(value) > 63 or not DNS_LABEL.match(value):
        raise ValueError(f"{what} {value!r} must be a DNS label (lowercase alphanumerics and '-', at most 63)")
    return value


def check_node_name(node: str) -> str:
    if len(node) > 253 or not DNS_SUBDOMAIN.match(node):
        raise ValueError(f"node name {node!r} must be a DNS subdomain")
    return node


def check_attribute_names(value: dict[str, Any], reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    for name in value:
        if not ATTRIBUTE_NAME.match(name):
            raise ValueError(f"attribute name {name!r} is not a DRA attribute name ([domain/]identifier)")
        if name in reserved:
            raise ValueError(f"attribute {name!r} is reserved: it is assigned, not configured")
    return value


def validate(model: type[M], raw: Any, what: str) -> M:
    """Validate a parsed document; one ConfigError that names every bad field."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} must be a mapping")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise ConfigError(f"invalid {what}: {problems}") from None


def read_yaml(path: str | Path, what: str) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}") from None
