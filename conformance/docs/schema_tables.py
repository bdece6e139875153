"""JSON Schema (pydantic's output) to Markdown: a field's type in words and its constraints, shared by the profile
and the protocol references."""

from __future__ import annotations

import re
from typing import Any

Schema = dict[str, Any]


def ref_name(schema: Schema) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def resolve(schema: Schema, defs: dict[str, Schema]) -> Schema:
    name = ref_name(schema)
    return defs[name] if name else schema


def non_null(schema: Schema) -> Schema:
    """The schema without its `null` alternative (Optional fields): the one alternative left, or the schema."""
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    return options[0] if len(options) == 1 else schema


def type_text(schema: Schema, defs: dict[str, Schema], link: bool = True) -> str:
    """A type in words: string, list of Process, map of string to integer, one of `a`, `b`; `or null` for
    optional fields."""
    if "anyOf" in schema:
        parts = [type_text(s, defs, link) for s in schema["anyOf"]]
        return " or ".join(dict.fromkeys(parts))
    name = ref_name(schema)
    if name:
        target = defs[name]
        if "enum" in target:
            return type_text(target, defs, link)
        return f"[{name}](#{name.lower()})" if link else name
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_text(schema.get('items', {}), defs, link)}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of string to {type_text(schema['additionalProperties'], defs, link)}"
    return str(kind)


_BOUNDS = (
    ("minimum", ">="),
    ("exclusiveMinimum", ">"),
    ("maximum", "<="),
    ("exclusiveMaximum", "<"),
    ("minLength", "length >="),
    ("maxLength", "length <="),
    ("minItems", "items >="),
)


def constraints(schema: Schema) -> str:
    """Bounds and patterns, from the schema and its non-null alternative."""
    found = [schema, non_null(schema)]
    words = []
    for part in found:
        words += [f"{sign} {part[key]:g}" for key, sign in _BOUNDS if isinstance(part.get(key), int | float)]
        words += [f"pattern `{part['pattern']}`"] if "pattern" in part else []
    return ", ".join(dict.fromkeys(words))


def default_text(schema: Schema, required: bool) -> str:
    if required:
        return "required"
    if "default" not in schema:
        return ""
    value = schema["default"]
    if value is None or value == {} or value == []:
        return "none" if value is None else f"`{value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


# A placeholder such as {port_file} outside code: Markdown's attr_list would take it for attributes and drop it.
_BARE_PLACEHOLDER = re.compile(r"(?<![`{])(\{[a-z_]+(?::[A-Za-z0-9_./-]+)?\})(?![`}])")


def prose(text: str) -> str:
    """Code text as Markdown prose: placeholders set as code, so they show as written."""
    return _BARE_PLACEHOLDER.sub(r"`\1`", text)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return prose(text).replace("|", "\\|").replace("\n", " ")
