"""The catalogue package (conformance/report/catalogue/): every family module's requirements are in the assembled
catalogue exactly once, and each family's reference text and applicability are for its own requirements."""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from types import ModuleType

import conformance.report.catalogue as catalogue
from conformance.report.catalogue import APPLIES, DOCS, REQUIREMENTS


def _families() -> list[ModuleType]:
    names = [m.name for m in pkgutil.iter_modules(catalogue.__path__) if m.name != "model"]
    return [importlib.import_module(f"{catalogue.__name__}.{name}") for name in names]


def test_every_family_requirement_is_in_the_catalogue_once() -> None:
    rows = Counter(r.id for family in _families() for r in family.REQUIREMENTS)
    assert rows == Counter(r.id for r in REQUIREMENTS)
    assert set(rows.values()) == {1}


def test_each_family_documents_only_its_own_requirements() -> None:
    for family in _families():
        own = {r.id for r in family.REQUIREMENTS}
        assert set(family.DOCS) <= own, family.__name__
        assert set(family.APPLIES) <= own, family.__name__
        assert all(DOCS[rid] is doc for rid, doc in family.DOCS.items())
        assert all(APPLIES[rid] is a for rid, a in family.APPLIES.items())
