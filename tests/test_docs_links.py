"""Every cross-reference of the docs resolves: relative links (and their anchors) of README.md and docs/*.md, and the
sections named in words (`README "Verdicts and exit status"`, `docs/certify.md "Worked examples"`) by the docs, the
profile templates (`profile init`), the Makefile and the suite's own modules. mkdocs --strict checks the site's
links too, but not README's, nor sections named in words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from conformance.docs.pages import generated

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
NAMED = re.compile(r"(README(?:\.md)?|docs/[\w/.-]+\.md),? ((?:\"[^\"\n]+\"(?:,? (?:and )?)?)+)")
ATTR = re.compile(r"\{:?\s*#([\w-]+)\s*\}")


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _text(path: Path) -> str | None:
    """A file's text; the generated references (`make docs` writes them under docs/reference/) from their generator."""
    if path.is_file():
        return path.read_text()
    rel = path.relative_to(DOCS).as_posix() if path.is_relative_to(DOCS) else ""
    return generated().get(rel)


def _headings(text: str) -> list[tuple[str, str]]:
    """(title, anchor) of every heading outside code blocks, as mkdocs' toc names them."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        title = line.lstrip("#").strip()
        attr = ATTR.search(title)
        title = ATTR.sub("", title).strip()
        found.append((title, attr[1] if attr else slugify(title.replace("`", ""), "-")))
    return found


def _links() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), target) for p in _markdown() for target in LINK.findall(p.read_text())]


@pytest.mark.parametrize(("source", "target"), _links(), ids=lambda v: str(v))
def test_every_relative_link_resolves(source: str, target: str) -> None:
    if re.match(r"[a-z]+:", target):
        return  # http(s), mailto: not checked here
    path, _, anchor = target.partition("#")
    resolved = (ROOT / source).parent / path if path else ROOT / source
    text = _text(resolved.resolve())
    assert text is not None, f"{source}: link {target}: {path} does not exist"
    if anchor and resolved.suffix == ".md":
        anchors = {a for _, a in _headings(text)}
        assert anchor in anchors, f"{source}: link {target}: no section #{anchor} in {path or source}"


def _named() -> list[tuple[str, str, str]]:
    sources = [p for p in _markdown() if p.name != "changelog.md"]  # the changelog is history: it names what was
    sources += sorted((ROOT / "conformance").rglob("*.py")) + sorted((ROOT / "conformance").rglob("profile-template*"))
    sources.append(ROOT / "Makefile")
    found = []
    for path in sources:
        for doc, sections in NAMED.findall(path.read_text()):
            for section in re.findall(r"\"([^\"\n]+)\"", sections):
                found.append((str(path.relative_to(ROOT)), "README.md" if doc.startswith("README") else doc, section))
    return found


def test_sections_named_in_words_exist() -> None:
    """A named section is a heading's title or its start (`docs/certify.md "Worked examples"`)."""
    missing = []
    for source, doc, section in _named():
        titles = [t.replace("`", "").lower() for t, _ in _headings(_text(ROOT / doc) or "")]
        if not any(t.startswith(section.lower()) for t in titles):
            missing.append(f'{source}: {doc} "{section}"')
    assert not missing, "named sections that do not exist:\n" + "\n".join(missing)


def test_the_checks_see_what_they_check() -> None:
    named = _named()
    assert ("conformance/implementation/profile-template.yaml", "docs/certify.md", "Worked examples") in named
    assert any(t.startswith("docs/reports.md#") for _, t in _links())
