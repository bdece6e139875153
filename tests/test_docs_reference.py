"""The generated references (conformance/docs/): every catalogue requirement and every profile field has its text,
and a missing one fails the page (and so `make docs`) instead of leaving a hole in the vendor's reference."""

from __future__ import annotations

import json

import pytest

from conformance.docs import pages, profile_reference, requirement_reference
from conformance.docs.profile_reference import MissingDoc
from conformance.implementation.profile import PLACEHOLDER, PLACEHOLDERS, Scope, json_schema, placeholder_problem
from conformance.report.catalogue import DESIGNS, DOCS, REQUIREMENTS, Requirement


def test_every_catalogue_requirement_has_its_reference_text() -> None:
    missing = [r.id for r in REQUIREMENTS if r.doc is None or not r.doc.checks.strip()]
    assert not missing, f"add a Doc to DOCS of its family module in conformance/report/catalogue/ for {missing}"
    assert set(DOCS) <= {r.id for r in REQUIREMENTS}, (
        f"DOCS for ids not in the catalogue: {set(DOCS) - {r.id for r in REQUIREMENTS}}"
    )
    for req in REQUIREMENTS:
        assert req.doc is not None and set(req.doc.models) <= set(DESIGNS), req.id


def test_a_requirement_without_text_fails_the_page() -> None:
    bare = Requirement("NEW-1", "implementation", "MUST", "something new", "Design Details")
    with pytest.raises(MissingDoc, match="NEW-1"):
        requirement_reference.render((*REQUIREMENTS, bare), [], {})


def test_every_profile_field_has_a_description() -> None:
    """The page itself refuses a field without one; the checked-in schema is the one pydantic writes."""
    text = pages.profile_page()
    schema = json_schema()
    for key in schema["properties"]:
        assert f"`{key}`" in text
    for name, obj in schema["$defs"].items():
        for key, prop in obj.get("properties", {}).items():
            assert prop.get("description", "").strip(), f"{name}.{key} has no description (implementation/profile/)"


def test_a_profile_field_without_description_fails_the_page() -> None:
    schema = json_schema()
    broken = json.loads(json.dumps(schema))
    broken["$defs"]["Promises"]["properties"]["newSeconds"] = {"type": "number", "default": 1}
    with pytest.raises(MissingDoc, match=r"promises\.newSeconds"):
        profile_reference.render(broken, PLACEHOLDERS, {})


def test_every_documented_placeholder_is_accepted_and_others_are_refused() -> None:
    for form in PLACEHOLDERS:
        match = PLACEHOLDER.fullmatch(form)
        assert match, form
        # per node: the widest scope ({node}, {pod_kubeconfig:...} without @NODE are valid there)
        problem = placeholder_problem(match[1], match[2], Scope(per_node=True)) or ""
        assert not problem.startswith("unknown placeholder"), form
    assert "unknown placeholder" in (placeholder_problem("nope", None, Scope()) or "")


def test_the_requirement_page_names_scenarios_tests_and_skips() -> None:
    text = pages.requirements_page()
    for req in REQUIREMENTS:
        assert f"{{ #{req.id.lower()} }}" in text
    section = text[text.index("{ #imp-4 }") : text.index("{ #imp-5 }")]
    assert "`attach-failure`" in section and "attachFailureReporting" in section and "faultInjector" in section
    assert "test_failure::" in section


def test_the_protocol_page_lists_every_operation() -> None:
    text = pages.protocols_page()
    openapi = json.loads(pages.OPENAPI.read_text())
    for path, methods in openapi["paths"].items():
        for method in methods:
            assert f"`{method.upper()} {path}`" in text
