"""`lifecycle`: the KEP's production-readiness answers on real binaries, each run on a cluster of its own whose
components it restarts (conformance/lifecycle/): `gates` switches DRADeviceBindingConditions off and on again,
`upgrade` goes OLD -> NEW -> OLD -> NEW on one etcd (its first step is the version skew)."""

from __future__ import annotations

from pathlib import Path

import click

from conformance.cli.options import version_option
from conformance.cluster.versions import KubeVersion
from conformance.report.verdict import EXIT_FAILURE, EXIT_PARTIAL

_EXIT = {"success": 0, "partial": EXIT_PARTIAL, "failure": EXIT_FAILURE}


@click.group("lifecycle")
def lifecycle() -> None:
    """Enable/disable/re-enable, upgrade/downgrade and version skew on a live local cluster (GATE-*, UPG-*, SKEW-*):
    a benchmark-like run of its own, not part of the suite (it restarts the control plane the suite's scenarios
    share). Writes conformance-report.yaml, lifecycle.md and results.tar.gz, which `dra-conformance review` merges.
    Exit status 0 success, 1 a requirement failed, 6 not everything was judged (the run stopped early)."""


def _exit(result: str) -> None:
    raise SystemExit(_EXIT.get(result, EXIT_FAILURE))


@lifecycle.command("gates")
@version_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="default reports/lifecycle/gates-VERSION",
)
@click.option(
    "--variant",
    default=None,
    help="a broken procedure on purpose, for the selftests: scheduler-stays-off, recreate-while-off",
)
def gates_command(version: KubeVersion, out: Path | None, variant: str | None) -> None:
    """DRADeviceBindingConditions switched off on kube-scheduler and kube-apiserver (the PRR's rollback order, then
    the other order) and on again, with a pod bound on a fabric device and a pod waiting in PreBind: GATE-1..3 and
    what each kind of object did, beside the KEP's sentences. On a release whose gate is locked on (1.38) nothing is
    started: GATE-1..3 are reported not applicable, with the reason, and the exit status is 0."""
    from conformance.lifecycle.gates import VARIANTS
    from conformance.lifecycle.run import run_gates

    if variant is not None and variant not in VARIANTS:
        raise click.BadParameter(f"one of {', '.join(VARIANTS)}", param_hint="--variant")
    from conformance.lifecycle.controlplane import NotCached

    try:
        outcome = run_gates(version, out or Path("reports/lifecycle") / f"gates-{version}", variant)
    except (ValueError, NotCached) as exc:
        raise click.ClickException(str(exc)) from None
    na = {e["reason"] for e in outcome.summary.values() if e["outcome"] == "not-applicable"}
    shown = f"not applicable: {na.pop()}" if na else outcome.result
    click.echo(f"lifecycle gates on {version}: {shown} ({outcome.out / 'lifecycle.md'})")
    _exit(outcome.result)


@lifecycle.command("upgrade")
@version_option
@click.option("--from", "old", default=None, help="the older release (default: the newest known of the minor before)")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="default reports/lifecycle/upgrade-OLD-NEW",
)
@click.option(
    "--variant",
    default=None,
    help="a broken procedure on purpose, for the selftests: skew-gate-off, downgrade-drops-fields",
)
def upgrade_command(version: KubeVersion, old: str | None, out: Path | None, variant: str | None) -> None:
    """Upgrade -> downgrade -> upgrade between OLD and NEW (--k8s-version) on one etcd, components in the
    version-skew policy's order, with a pod bound on a fabric device and a pod waiting in PreBind carried across
    every switch: UPG-1..3; the first step (kube-apiserver on NEW, kube-scheduler and kube-controller-manager on OLD)
    is the skew, SKEW-1. Both releases' binaries must be cached (never built here)."""
    from conformance.cluster.versions import UnsupportedVersion, parse_version
    from conformance.lifecycle.controlplane import NotCached
    from conformance.lifecycle.run import run_upgrade
    from conformance.lifecycle.upgrade import VARIANTS

    if variant is not None and variant not in VARIANTS:
        raise click.BadParameter(f"one of {', '.join(VARIANTS)}", param_hint="--variant")
    try:
        older = parse_version(old or f"{version.major}.{version.minor - 1}")
        target = out or Path("reports/lifecycle") / f"upgrade-{older}-{version}"
        outcome = run_upgrade(older, version, target, variant)
    except (ValueError, UnsupportedVersion, NotCached) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"lifecycle upgrade {older} <-> {version}: {outcome.result} ({outcome.out / 'lifecycle.md'})")
    _exit(outcome.result)
