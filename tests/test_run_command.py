"""`dra-conformance run` (what `make conformance` calls): its status meanings are README's exit table, and it passes
the suite's status through unchanged (pytest.main faked here; the real suite: tests/selftest/test_run_command.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import main
from conformance.cli import run as run_module

README = Path(__file__).resolve().parents[1] / "README.md"


def _exit_table() -> dict[int, str]:
    rows = re.findall(r"^\| (\d) \| (.+) \|$", README.read_text(), re.M)
    return {int(code): text for code, text in rows}


def test_every_status_of_readme_has_the_run_commands_meaning() -> None:
    table = _exit_table()
    assert {0, 1, 6, 7} <= set(table), table
    for code in (0, 1, 6, 7):
        word = run_module.MEANINGS[code].split(":")[0]
        assert word in table[code], f"exit {code}: README says {table[code]!r}, the run command {word!r}"


@pytest.mark.parametrize("status", [0, 1, 2, 6, 7])
def test_the_suites_status_is_returned_and_printed_last(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status: int
) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(run_module.pytest, "main", lambda args: seen.append(args) or status)
    result = CliRunner().invoke(
        main, ["run", "--profile", "none", "--reports-dir", str(tmp_path), "--accept", "partial", "--", "-k", "API"]
    )
    assert result.exit_code == status
    assert result.output.splitlines()[-1] == run_module.status_line(status)
    args = seen[0]
    assert args[0].endswith("conformance/suite") and args[-2:] == ["-k", "API"]
    assert args[args.index("--profile") : args.index("--profile") + 2] == ["--profile", "none"]
    assert f"--reports-dir={tmp_path}" in args and "partial" in args


def test_the_runs_headline_comes_just_before_the_status_and_a_stale_one_never(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pytest's own summary lines follow the suite's headline: the command repeats it above its status line, from the
    report this run wrote (not one an earlier run left)."""
    headline = "implementation: success (8 not applicable) · cluster: success · exit 0"
    report = tmp_path / "conformance-report.yaml"

    def suite(args: list[str]) -> int:
        report.write_text(f"result: success\nheadline: '{headline}'\n")
        return 0

    monkeypatch.setattr(run_module.pytest, "main", suite)
    result = CliRunner().invoke(main, ["run", "--reports-dir", str(tmp_path)])
    assert result.output.splitlines()[-2:] == [headline, run_module.status_line(0)]
    monkeypatch.setattr(run_module.pytest, "main", lambda args: 4)  # a usage error: no report written
    os.utime(report, (0, 0))
    result = CliRunner().invoke(main, ["run", "--reports-dir", str(tmp_path)])
    assert result.output.splitlines() == [run_module.status_line(4)]


def test_a_zero_with_accepted_known_defects_says_so() -> None:
    headline = "implementation: success · cluster: failure, only known upstream defect SCH-9 (accepted) · exit 0"
    assert "known upstream defects accepted" in run_module.status_line(0, headline)
    assert run_module.status_line(0, "implementation: success · cluster: success · exit 0").endswith("(success)")
