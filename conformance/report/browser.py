"""Check the HTML report in a real browser engine: Debian's chromium, headless (`make chromium` installs it).

Chromium renders the page (a screenshot is kept) and dumps the DOM it built; from that DOM every link must
resolve (a relative file that exists next to the page, or an element id of the page) and no element may load
anything from outside the page.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

BROWSERS = ("chromium", "chromium-browser")
TIMEOUT_S = 120
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars")


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@dataclass
class _Links(HTMLParser):
    links: list[str] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)  # src= and <link href>: what the page would fetch
    ids: set[str] = field(default_factory=set)
    svgs: int = 0
    text: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        if a.get("src"):
            self.loads.append(a["src"] or "")
        if tag == "link" and a.get("href"):
            self.loads.append(a["href"] or "")
        if tag == "svg":
            self.svgs += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@dataclass
class BrowserCheck:
    screenshot: Path
    links: int
    svgs: int
    problems: list[str]


def check_page(page: Path, screenshot: Path, chromium: str | None = None) -> BrowserCheck:
    """Render `page` in headless chromium, keep a screenshot, and check every link of the DOM it built."""
    browser = chromium or find_chromium()
    if browser is None:
        raise FileNotFoundError("no chromium on PATH: `make chromium` (apt-get install -y chromium)")
    url = page.resolve().as_uri()
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    shot = subprocess.run(
        [browser, *_FLAGS, f"--screenshot={screenshot.resolve()}", "--window-size=1280,2400", url],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    problems, parsed = _built_dom(browser, url)
    if shot.returncode != 0 or not screenshot.exists() or screenshot.stat().st_size == 0:
        problems.append(f"no screenshot (exit {shot.returncode}): {shot.stderr[-500:]}")
    for href in parsed.links:
        target = urlparse(href)
        if target.scheme in ("http", "https"):
            problems.append(f"external link {href} (the report must work offline)")
        elif href.startswith("#"):
            if href[1:] not in parsed.ids:
                problems.append(f"link {href}: no element with that id")
        elif target.scheme in ("", "file"):
            path = Path(unquote(target.path)) if target.scheme == "file" else page.parent / unquote(target.path)
            if not path.is_file():
                problems.append(f"link {href}: {path} does not exist")
    problems += [f"loads {src} from outside the page" for src in parsed.loads if not src.startswith("data:")]
    return BrowserCheck(screenshot, len(parsed.links), parsed.svgs, problems)


def _built_dom(browser: str, url: str) -> tuple[list[str], _Links]:
    """The DOM chromium built for `url`, parsed, and what went wrong building it."""
    dom = subprocess.run([browser, *_FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=TIMEOUT_S)
    problems = []
    if dom.returncode != 0 or "<body" not in dom.stdout:
        problems.append(f"chromium built no DOM (exit {dom.returncode}): {dom.stderr[-500:]}")
    parsed = _Links()
    parsed.feed(dom.stdout)
    return problems, parsed


def _static_ids(path: Path) -> set[str]:
    parsed = _Links()
    parsed.feed(path.read_text(errors="replace"))
    return parsed.ids


def check_site_page(page: Path, chromium: str | None = None) -> BrowserCheck:
    """A page of the documentation site (make docs) in headless chromium: every link of the DOM it built must resolve —
    an id of the page, or a file of the site and, with a #fragment, an id of that file — and nothing may be loaded from
    outside the site (it is read offline). Links to other sites are counted, not fetched."""
    browser = chromium or find_chromium()
    if browser is None:
        raise FileNotFoundError("no chromium on PATH: `make chromium` (apt-get install -y chromium)")
    problems, parsed = _built_dom(browser, page.resolve().as_uri())
    for href in parsed.links:
        target = urlparse(href)
        if target.scheme in ("http", "https", "mailto"):
            continue
        if not target.path:
            if target.fragment and unquote(target.fragment) not in parsed.ids:
                problems.append(f"link {href}: no element with that id")
            continue
        path = Path(unquote(target.path)) if target.scheme == "file" else page.parent / unquote(target.path)
        path = path / "index.html" if path.is_dir() else path
        if not path.is_file():
            problems.append(f"link {href}: {path} does not exist")
        elif target.fragment and path.suffix == ".html" and unquote(target.fragment) not in _static_ids(path):
            problems.append(f"link {href}: {path.name} has no element with id {target.fragment!r}")
    problems += [
        f"loads {src} from outside the site"
        for src in parsed.loads
        if urlparse(src).scheme in ("http", "https") or src.startswith("//")
    ]
    return BrowserCheck(page, len(parsed.links), parsed.svgs, problems)
