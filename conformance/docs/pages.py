"""The generated pages of the documentation site: site path -> Markdown. Run by the MkDocs hook (hook.py) at every
build and by `dra-conformance docs`; raises MissingDoc when a requirement or a profile field has no text."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.docs import profile_reference, protocol_reference, requirement_reference, review_page
from conformance.docs.requirement_reference import MarkedTest

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "docs" / "fabric-protocols.openapi.json"


def marked_tests() -> dict[str, list[MarkedTest]]:
    """Requirement id -> the suite's tests marked with it (importing the suite also fills the scenario REGISTRY)."""
    from conformance.suite.profilecheck import suite_modules

    found: dict[str, list[MarkedTest]] = {}
    for module in suite_modules():
        for name, fn in vars(module).items():
            marks = getattr(fn, "pytestmark", []) if name.startswith("test") and callable(fn) else []
            run_wide = any(m.name == "run_wide" for m in marks)
            for mark in marks:
                if mark.name == "requirement":
                    for req in mark.args:
                        found.setdefault(req, []).append(MarkedTest(module.__name__, name, run_wide))
    return found


def requirements_page() -> str:
    from conformance.report.catalogue import REQUIREMENTS
    from conformance.suite.record import REGISTRY

    tests = marked_tests()  # first: it imports the suite, which registers the scenarios
    return requirement_reference.render(REQUIREMENTS, list(REGISTRY.values()), tests)


def profile_page() -> str:
    from conformance.implementation.profile import PLACEHOLDERS, json_schema
    from conformance.suite.record import REGISTRY

    marked_tests()
    capabilities: dict[str, list[str]] = {}
    for sc in REGISTRY.values():
        for cap in sc.capabilities:
            capabilities.setdefault(cap, []).append(sc.name)
    return profile_reference.render(json_schema(), PLACEHOLDERS, capabilities)


def protocols_page() -> str:
    return protocol_reference.render(json.loads(OPENAPI.read_text()))


def schema_file() -> str:
    from conformance.implementation.profile import json_schema

    return json.dumps(json_schema(), indent=2) + "\n"


def generated() -> dict[str, str]:
    """Every generated file of the site, by its path under docs/."""
    return {
        "reference/requirements.md": requirements_page(),
        "reference/profile.md": profile_page(),
        "reference/profile.schema.json": schema_file(),
        "reference/protocols.md": protocols_page(),
        "review.md": review_page.render(),
    }


def write(out: Path) -> list[Path]:
    written = []
    for rel, text in generated().items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
