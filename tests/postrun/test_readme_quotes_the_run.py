"""README quotes, word for word, what a default run prints last (issue 36: "a fresh clone's `make conformance` output
matches the docs word for word where the docs quote it"). Run after a real run by `make docs-match` (part of
`make test`, after `make conformance`), with DRA_RUN_REPORTS naming that run's reports folder; the other docs quote
the same headline (tests/test_docs_headline.py keeps them equal to README's)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from conformance.cli.run import RUN_STATUS

ROOT = Path(__file__).resolve().parents[2]
REPORTS = os.environ.get("DRA_RUN_REPORTS", "")
# The fenced block after this sentence in README's "Verdicts and exit status".
INTRO = re.compile(r"A default\s+`make conformance` on (?P<release>[\d.]+).*?ends:\s*```\n(?P<quote>.*?)```", re.S)

pytestmark = pytest.mark.skipif(not REPORTS, reason="run after a real run: `make docs-match` (DRA_RUN_REPORTS)")


def test_readme_quotes_the_last_lines_of_a_default_run() -> None:
    readme = (ROOT / "README.md").read_text()
    found = INTRO.search(readme)
    assert found, "README.md no longer quotes what a default `make conformance` ends with"
    printed = Path(REPORTS) / RUN_STATUS
    assert printed.is_file(), f"{printed}: no run's last lines (was the run made with `dra-conformance run`?)"
    report = yaml.safe_load((Path(REPORTS) / "conformance-report.yaml").read_text())
    version = str((report.get("cluster") or {}).get("kubernetes", ""))
    assert found["release"] in version, f"README quotes a run on {found['release']}; this run was on {version!r}"
    assert printed.read_text() == found["quote"], (
        f"README.md quotes:\n{found['quote']}\nthe run printed:\n{printed.read_text()}"
    )
