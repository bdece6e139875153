"""Reading a profile file: YAML, validated with one message naming the field (ProfileError), and the published
JSON Schema and starting profiles next to this package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from conformance.implementation.profile.model import API_VERSION, KIND, Profile


class ProfileError(ValueError):
    """The profile cannot be used; the message names the file and the field."""


# The schema and the starting profiles lie next to this package, in conformance/implementation/.
SCHEMA_FILE = Path(__file__).parent.with_name("profile.schema.json")
TEMPLATE_FILE = Path(__file__).parent.with_name("profile-template.yaml")  # `dra-conformance profile init`
FULL_TEMPLATE_FILE = Path(__file__).parent.with_name("profile-template-full.yaml")  # `profile init --full`: every field


class LoadedProfile(BaseModel):
    """A validated profile and where it came from (placeholders resolve relative to its folder)."""

    model_config = ConfigDict(frozen=True)
    path: Path
    profile: Profile


def load_profile(path: str | Path) -> LoadedProfile:
    path = Path(path)
    try:
        raw: Any = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ProfileError(f"profile {path}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile {path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"profile {path}: expected a mapping at the top")
    if "apiVersion" not in raw or "kind" not in raw:
        raise ProfileError(
            f"profile {path}: apiVersion/kind missing: profiles are versioned; start it with "
            f"'apiVersion: {API_VERSION}' and 'kind: {KIND}' (schema: {SCHEMA_FILE.name}; "
            "`dra-conformance profile init` writes a commented starting profile)"
        )
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '<top>'}: {err['msg']}" for err in exc.errors())
        raise ProfileError(f"profile {path}: {problems}") from None
    return LoadedProfile(path=path.resolve(), profile=profile)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of this profile version (published as profile.schema.json; editors and CI can use it)."""
    schema = Profile.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://{API_VERSION.split('/')[0]}/schemas/{API_VERSION.split('/')[1]}/{KIND}.json",
        **schema,
        "title": f"{KIND} ({API_VERSION})",
    }
