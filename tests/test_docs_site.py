"""The documentation site (make docs): built offline with MkDocs --strict from docs/ and the generated references,
then its start page and the requirement reference loaded in headless chromium (Debian's, `make chromium`): every link
of the DOM chromium built resolves (a page of the site, an anchor that exists) and nothing is loaded from outside."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.browser import check_site_page, find_chromium

ROOT = Path(__file__).resolve().parents[1]


def _build(out: Path, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "-f", str(config or ROOT / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = _build(out)
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """--strict is what makes `make docs` fail: a page linking to a page that does not exist stops the build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](nowhere.md) and [no anchor](#nope)\n")
    config = ROOT / "mkdocs.yml"
    text = config.read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    text = text[: text.index("hooks:")] + text[text.index("theme:") :]  # no generated pages
    text = text[: text.index("nav:")]
    (tmp_path / "mkdocs.yml").write_text(text)
    built = _build(tmp_path / "site", tmp_path / "mkdocs.yml")
    assert built.returncode != 0
    assert "nowhere.md" in built.stderr, built.stderr[-2000:]


def test_every_generated_reference_is_in_the_site(site: Path) -> None:
    from conformance.report.catalogue import REQUIREMENTS

    page = (site / "reference" / "requirements.html").read_text()
    for req in REQUIREMENTS:
        assert f'id="{req.id.lower()}"' in page, f"{req.id} has no section in the built requirement reference"
    assert (site / "reference" / "profile.schema.json").is_file()
    profile = (site / "reference" / "profile.html").read_text()
    assert "fabricProbe" in profile
    from conformance.implementation.profile import PLACEHOLDERS

    for form in PLACEHOLDERS:  # attr_list takes a bare {name} at the end of a block for attributes and drops it
        assert profile.count(form) >= 1, f"{form} is missing from the built profile reference"
    for page in [*site.glob("*.html"), *site.glob("reference/*.html")]:
        eaten = re.findall(r"<(?:p|li|td|th|h[1-6])(?: [a-z_:]+)+>", page.read_text())
        assert not eaten, f"{page.name}: Markdown took text for attributes: {eaten[:3]}"


@pytest.mark.skipif(find_chromium() is None, reason="no chromium on this machine: `make chromium` installs it")
@pytest.mark.parametrize("page", ["index.html", "reference/requirements.html", "reference/profile.html"])
def test_chromium_loads_the_site_and_every_link_resolves(site: Path, page: str) -> None:
    result = check_site_page(site / page)
    assert result.links > 10, f"{page}: chromium's DOM has only {result.links} links"
    assert not result.problems, f"{page}:\n" + "\n".join(result.problems)
