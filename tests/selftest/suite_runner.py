"""Run the conformance suite as a real pytest subprocess (its own cluster), for tests of the tests."""

from __future__ import annotations

import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.report.reasons import headline
from conformance.suite.cause import is_wait_symptom

ROOT = Path(__file__).resolve().parents[2]
# The release the selftest session runs on (set from its --k8s-version by conftest.py), passed to every suite run.
VERSION_ARGS: list[str] = []


def suite_argv(target: str, *extra: str) -> list[str]:
    """The command line of a suite run in its own process (no cache: selftests run side by side)."""
    return [sys.executable, "-m", "pytest", target, "-p", "no:cacheprovider", *extra]


# as the Makefile's ACCEPT_KNOWN_DEFECTS
KNOWN_DEFECTS_ACCEPTED = ("double-allocation-after-binding-timeout", "scheduler-panic-in-resourceslice-tracker")


def run_suite(
    junit: Path,
    *args: str,
    target: str = "conformance/suite",
    accept_partial: bool = True,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> tuple[int, str, dict[str, str]]:
    """Exit code, combined output and the outcome of each test case (from the JUnit XML). Selftests run a file or
    a broken variant, which knowingly covers a subset: `--accept partial` unless accept_partial=False. `env`: the
    suite's environment (default: this one). Every run accepts the known upstream defects the Makefile accepts (a
    whole-suite run on 1.37 always shows kube-scheduler's double allocation after a binding timeout: SCH-9 still
    fails in the outcomes, the exit status judges the rest). `timeout`: seconds the run may take."""
    accept = ["--accept", "partial"] if accept_partial else []
    accept += [f"--accept=known-defect:{d}" for d in KNOWN_DEFECTS_ACCEPTED]
    argv = suite_argv(target, f"--junitxml={junit}", "-q", *VERSION_ARGS, *accept, *args)
    proc = run_forwarding(argv, env=env, timeout=timeout)
    outcomes = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            outcomes[case.get("name")] = kinds[0] if kinds else "passed"
    bare = bare_wait_timeouts(junit)  # every variant of every selftest: issue 36's done-when
    assert not bare, "first lines that are a wait's symptom, not its cause:\n" + "\n".join(bare)
    return proc.returncode, proc.stdout + proc.stderr, outcomes


# A suite stopped with SIGTERM tears its cluster and implementation down first: give it this long before a kill.
TEARDOWN_S = 120


def run_forwarding(
    argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run a suite subprocess so that it never outlives this one with its cluster: a SIGTERM to this process is passed
    on to it (then this process stops too, as it would have), and on the timeout it gets SIGTERM, not SIGKILL, so its
    own teardown removes the cluster (subprocess.run's timeout kills, leaking the child's cluster; its SIGTERM was not
    forwarded at all). Ctrl-C reaches the child through the terminal's process group already."""
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        child.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.terminate()
            try:
                out, err = child.communicate(timeout=TEARDOWN_S)
            except subprocess.TimeoutExpired:
                child.kill()
                out, err = child.communicate()
            err += f"\n[selftest] the suite ran over {timeout:g} s and was stopped with SIGTERM\n"
    finally:
        signal.signal(signal.SIGTERM, previous)
    if received:
        raise KeyboardInterrupt(f"SIGTERM forwarded to the suite subprocess (pid {child.pid}), which has ended")
    return subprocess.CompletedProcess(argv, child.returncode, out, err)


def bare_wait_timeouts(junit: Path) -> list[str]:
    """The test cases of a suite run whose failure or skip has a wait's symptom for its first line ("timed out after
    ... waiting for", "last seen: nothing observed") instead of its cause (suite/cause.py). pytest's JUnit message is
    the first line every report shows (report/reasons.py headline)."""
    if not junit.exists():
        return []
    return [
        f"{case.get('name')}: {first}"
        for case in ET.parse(junit).getroot().iter("testcase")
        for child in case
        if child.tag in ("failure", "error", "skipped")
        and is_wait_symptom(first := headline(child.get("message") or ""))
    ]


def failure_first_line(junit: Path, test: str) -> str:
    """The first line of test `test`'s failure in pytest's JUnit (its exception type left out), or ""."""
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if case.get("name") == test and failure is not None:
            message = failure.get("message") or ""
            return message.removeprefix("Failed: ").removeprefix("AssertionError: ").splitlines()[0]
    return ""


def failure_message(junit: Path, test: str) -> str:
    """The whole message of test `test`'s failure in pytest's JUnit, or ""."""
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if case.get("name") == test and failure is not None:
            return failure.get("message") or ""
    return ""


def known_defect_cases(junit: Path) -> set[str]:
    """Names of the test cases whose failure the suite explained as a known upstream defect's symptom (their JUnit
    property `known_defect`): a whole-suite run on 1.37 always has SCH-9's."""
    if not junit.exists():
        return set()
    return {
        str(case.get("name"))
        for case in ET.parse(junit).getroot().iter("testcase")
        if any(prop.get("name") == "known_defect" for prop in case.iter("property"))
    }


def on_existing(kubeconfig: Path, profile: Path) -> list[str]:
    """The suite's options for a run on a cluster it did not start (the marker ConfigMap must be there)."""
    return ["--provider", "existing", "--kubeconfig", str(kubeconfig), "--profile", str(profile)]


def profile_variant(tmp_path: Path, old: str, new: str, source: str = "reference.yaml") -> Path:
    """A copy of a committed profile with one command-line change (e.g. a broken mode), placeholders kept working."""
    profiles = ROOT / "fixtures" / "profiles"
    text = (profiles / source).read_text().replace("{profile_dir}", str(profiles))
    changed = text.replace(old, new)
    assert changed != text, f"{source} no longer contains {old!r}; update this selftest"
    path = tmp_path / f"variant-{source}"
    path.write_text(changed)
    return path


def profile_changes(tmp_path: Path, source: str, *changes: tuple[str, str]) -> Path:
    """A copy of a committed profile with several command-line changes, each of which must apply."""
    path = profile_variant(tmp_path, *changes[0], source=source)
    for old, new in changes[1:]:
        text = path.read_text()
        assert old in text, f"{source} no longer contains {old!r}; update this selftest"
        path.write_text(text.replace(old, new))
    return path
