"""`implementation up/restart`: run a profile's implementation outside the suite, supervised."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def implementation() -> None:
    """Run a profile's implementation outside the suite (docs/certify.md "Already running")."""


@implementation.command("up")
@click.option("--profile", "profile_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--kubeconfig", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--state",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="folder for env (to source), NAME.pid and NAME.log",
)
def implementation_up(profile_path: Path, kubeconfig: Path, state: Path) -> None:
    """Start the profile's implementation against a cluster and keep it running in the foreground, supervised:
    a process that exits is started again. SIGINT/SIGTERM stop everything cleanly. Exit status 1 if it could
    not start or did not stop cleanly."""
    import datetime

    from conformance.implementation.harness import Implementation, ImplementationFailed
    from conformance.implementation.profile import ProfileError, load_profile
    from conformance.implementation.supervise import Watchdog

    def say(message: str) -> None:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
        click.echo(f"{stamp} [implementation] {message}", err=True)

    try:
        loaded = load_profile(profile_path)
    except ProfileError as exc:
        raise click.ClickException(str(exc)) from None
    if not loaded.profile.processes:
        raise click.ClickException(f"{profile_path} starts no processes: nothing to supervise")
    state.mkdir(parents=True, exist_ok=True)
    impl = Implementation(loaded, kubeconfig.resolve(), state.resolve(), progress=say)
    try:
        problems = Watchdog(impl, say).run()
    except (ImplementationFailed, ProfileError) as exc:
        raise click.ClickException(f"cannot start the implementation of {profile_path}: {exc}") from None
    if problems:
        raise click.ClickException("did not stop cleanly:\n" + "\n".join(problems))
    say("stopped cleanly")


@implementation.command("restart")
@click.option("--state", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(min=1))
@click.argument("name")
def implementation_restart(state: Path, timeout: float, name: str) -> None:
    """Kill process NAME of `implementation up --state STATE` (SIGKILL, a crash) and wait until the supervisor has
    it ready again: a restart command for a profile's `roles`."""
    from conformance.cluster.waits import WaitTimeout
    from conformance.implementation.harness import ImplementationFailed
    from conformance.implementation.supervise import restart_process

    try:
        old, new = restart_process(state, name, timeout)
    except (ImplementationFailed, WaitTimeout) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{name}: killed pid {old}; running again as pid {new}")
