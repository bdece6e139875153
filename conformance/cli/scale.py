"""`dra-conformance scale`: the scalability benchmark (`make scale`), one process per point, then the table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import click


@click.command("scale")
@click.option("--nodes", "sizes", default="100 1000 5000", show_default=True, help="kwok nodes per point")
@click.option("--pods", default=1000, show_default=True, type=click.IntRange(min=1), help="pods per wave")
@click.option("--fabrics", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--k8s-version", default="1.37.2", show_default=True)
@click.option("--gogc", default="100", show_default=True, help="GOGC of the control plane (suite runs: 400)")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/scale"), show_default=True
)
def scale_command(sizes: str, pods: int, fabrics: int, k8s_version: str, gogc: str, out: Path) -> None:
    """A benchmark, not a test: for each node count a local cluster of that many kwok nodes, the reference fabric
    manager and controller on FABRICS fabrics reaching them, PODS pods without binding conditions, then PODS pods
    all waiting in PreBind at once until their attaches are released. Figures from kube-scheduler's and
    kube-apiserver's /metrics, the run-wide record and /proc; OUT/point-<nodes>.json per point, OUT/scale.json and
    the table (also OUT/scale.md). Every cluster is torn down, also on Ctrl-C or a failure."""
    from conformance.scale.table import closing, markdown, text

    out.mkdir(parents=True, exist_ok=True)
    points = []
    started = time.monotonic()
    for nodes in [int(n) for n in sizes.split()]:
        path = out / f"point-{nodes}.json"
        path.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "conformance.scale.point", "--nodes", str(nodes), "--pods", str(pods)]
        argv += ["--fabrics", str(fabrics), "--k8s-version", k8s_version, "--gogc", gogc]
        argv += ["--workdir", str(out / f"work-{nodes}"), "--out", str(path)]
        click.echo(f"[scale] {nodes} nodes, {pods} pods per wave", err=True)
        code = _run(argv)
        points.append(json.loads(path.read_text()) if path.exists() else {"nodes": nodes, "failed": f"exit {code}"})
        if code != 0:
            click.echo(f"[scale] the {nodes}-node point failed (exit {code}): {points[-1].get('failed')}", err=True)
            if code in (-signal.SIGINT, 130):
                break
    (out / "scale.json").write_text(json.dumps(points, indent=2) + "\n")
    (out / "scale.md").write_text("\n".join(markdown(points)) + "\n")
    for line in text(points):
        click.echo(line)
    note = closing(points, time.monotonic() - started)
    (out / "closing.txt").write_text(note + "\n")
    click.echo(f"[scale] {note}; figures in {out / 'scale.json'}", err=True)
    if any(p.get("failed") for p in points):
        raise SystemExit(1)


def _run(argv: list[str]) -> int:
    """Run one point; Ctrl-C reaches it too (same process group): wait for its teardown, then stop."""
    proc = subprocess.Popen(argv)
    previous = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue  # the point got the SIGINT as well and is tearing its cluster down
    finally:
        signal.signal(signal.SIGTERM, previous)
