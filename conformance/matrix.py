"""`make matrix`: the whole suite on every supported release, one after the other, and one matrix report.

Each release: its binaries are built if missing (cached ones are reused), then the suite runs in its own pytest
process with its own reports folder (JUnit, Allure, conformance report, log). Releases run one at a time: a
suite run already keeps the machine's cores busy with its scenarios side by side.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from conformance.cluster.toolchain.build import ensure_binaries
from conformance.cluster.toolchain.cache import Cache, default_cache_root
from conformance.cluster.toolchain.source import source_from_env
from conformance.cluster.versions import RELEASES, KubeVersion, parse_version
from conformance.report.matrix import RUN_RECORD, Matrix, ReleaseRun, load_run, write_matrix

ROOT = Path(__file__).resolve().parent.parent


def _run_to_its_end(cmd: list[str], log: IO[str]) -> int:
    """Run one release's suite. On Ctrl-C or SIGTERM the suite is asked to stop (SIGINT) and waited for: it removes
    its implementation and cluster within seconds. subprocess.run would kill it after 0.25 s and leave both running."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM too: stop the way Ctrl-C does
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)  # a Ctrl-C on a terminal reached it already: a second one only says so
        proc.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def supported_versions() -> list[KubeVersion]:
    """The newest known version of every supported minor, oldest first."""
    return [parse_version(RELEASES[minor].latest_patch) for minor in sorted(RELEASES)]


def build_seconds(version: KubeVersion, cache: Cache | None = None) -> float | None:
    """What building this release's Kubernetes binaries and its etcd took, from the cache's build records."""
    cache = cache or Cache(default_cache_root())
    kube = cache.component("kubernetes", source_from_env(version.tag).key).record()
    if not kube.get("binaries"):
        return None
    etcd = cache.component("etcd", kube.get("etcd_version", "")).record() if kube.get("etcd_version") else {}
    records = [*kube["binaries"].values(), *etcd.get("binaries", {}).values()]
    return round(sum(r.get("seconds", 0.0) for r in records), 1)


def run_release(
    version: KubeVersion, out: Path, profile: str, pytest_args: Sequence[str], say: Callable[[str], None]
) -> ReleaseRun:
    """Build what is missing, run the suite on `version`, and read its report."""
    folder = out / str(version)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        ensure_binaries(version, progress=say)
    except Exception as exc:  # a build failure is this release's result, not the end of the matrix
        return ReleaseRun(str(version), None, note=f"binaries could not be built: {exc}", reports_dir=str(folder))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "conformance/suite",
        "-p",
        "no:cacheprovider",
        "-q",
        "--k8s-version",
        str(version),
        "--profile",
        profile,
        f"--reports-dir={folder}",
        f"--junitxml={folder / 'junit.xml'}",
        f"--alluredir={folder / 'allure'}",
        *pytest_args,
    ]
    say(f"matrix: running the suite on Kubernetes {version} (log: {folder / 'pytest.log'})")
    (folder / "conformance-report.yaml").unlink(missing_ok=True)  # never read a previous run's report
    started = time.monotonic()
    with (folder / "pytest.log").open("w") as log:
        code = _run_to_its_end(cmd, log)
    seconds = round(time.monotonic() - started, 1)
    (folder / RUN_RECORD).write_text(json.dumps({"exit_code": code, "run_seconds": seconds}) + "\n")
    tail = "\n".join((folder / "pytest.log").read_text(errors="replace").strip().splitlines()[-3:])
    say(f"matrix: Kubernetes {version}: exit {code} in {seconds:.0f}s: {tail.splitlines()[-1] if tail else ''}")
    return load_run(
        str(version),
        folder,
        exit_code=code,
        run_seconds=seconds,
        build_seconds=build_seconds(version),
        note="" if (folder / "conformance-report.yaml").exists() else f"pytest exit {code}, no report: {tail}",
    )


def run_matrix(
    versions: Sequence[KubeVersion],
    out: Path,
    profile: str,
    pytest_args: Sequence[str] = (),
    *,
    report_only: bool = False,
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
) -> tuple[Matrix, dict[str, Path]]:
    """Run every release (or, with report_only, read the reports already in `out`) and write the matrix."""
    runs = []
    for version in versions:
        if report_only:
            runs.append(load_run(str(version), out / str(version), build_seconds=build_seconds(version)))
        else:
            runs.append(run_release(version, out, profile, pytest_args, say))
    matrix = Matrix(runs, profile=profile)
    return matrix, write_matrix(matrix, out)
