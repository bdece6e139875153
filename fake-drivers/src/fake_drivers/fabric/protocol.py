"""The probe and fault-injector protocols as an OpenAPI document (docs/fabric-protocols.openapi.json).

The conformance suite reads an implementation's fabric through two optional HTTP APIs (docs/fabric.md; the site's
protocol reference is generated from this document). The reference fabric manager serves both; its FastAPI schema,
cut to those two tag groups, is the published contract any implementation (or an adapter in front of it) must serve.
`python -m fake_drivers.fabric.protocol > docs/fabric-protocols.openapi.json` writes it again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fake_drivers.fabric.config import build_config
from fake_drivers.fabric.manager import FabricManager
from fake_drivers.fabric.service import create_app
from fake_drivers.fabric.store import Store

PROTOCOL_TAGS = ("probe", "faults", "readiness")


def protocol_openapi(workdir: Path) -> dict[str, Any]:
    """The OpenAPI document of the probe and fault paths (a throw-away manager in `workdir` builds the app)."""
    config = build_config({"fabrics": [{"id": "f", "nodes": ["n"], "devices": [{"model": "m", "count": 1}]}]})
    app = create_app(FabricManager(config, Store(workdir / "protocol.db")))
    full = app.openapi()
    paths = {
        path: {verb: op for verb, op in ops.items() if set(op.get("tags", [])) & set(PROTOCOL_TAGS)}
        for path, ops in full["paths"].items()
    }
    kept = {path: ops for path, ops in paths.items() if ops}
    return {
        **full,
        "components": {"schemas": _referenced(kept, full.get("components", {}).get("schemas", {}))},
        "info": {
            "title": "KEP-5007 conformance: fabric probe, readiness probe and fault injector",
            "version": "v1",
            "description": "What a profile's fabricProbe, readinessProbe and faultInjector URLs must answer (the "
            "documentation site's 'Fabric probe and fault injector'). Generated from the reference fabric manager.",
        },
        "paths": kept,
    }


def _referenced(root: Any, schemas: dict[str, Any]) -> dict[str, Any]:
    """The schemas `root` refers to, and those they refer to in turn."""
    found: dict[str, Any] = {}
    todo = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            name = ref.rsplit("/", 1)[-1] if ref.startswith("#/components/schemas/") else None
            if name and name not in found:
                found[name] = schemas[name]
                todo.append(schemas[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return dict(sorted(found.items()))


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        json.dump(protocol_openapi(Path(tmp)), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
