"""`profile init/schema/check`: write, validate and explain implementation profiles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from conformance.implementation.profile import Profile


@click.group()
def profile() -> None:
    """Write, validate and explain implementation profiles (docs/certify.md)."""


@profile.command("init")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="file to write (default: stdout)"
)
@click.option("--force", is_flag=True, help="overwrite --out if it exists")
@click.option("--full", is_flag=True, help="every field of the schema, commented (hooks, roles, perNode, tls...)")
def profile_init(out: Path | None, force: bool, full: bool) -> None:
    """A commented starting profile, valid as it is; edit it, then `profile check` it."""
    from conformance.implementation.profile import FULL_TEMPLATE_FILE, TEMPLATE_FILE

    text = (FULL_TEMPLATE_FILE if full else TEMPLATE_FILE).read_text()
    if out is None:
        click.echo(text, nl=False)
        return
    if out.exists() and not force:
        raise click.ClickException(f"{out} exists; pass --force to overwrite it")
    out.write_text(text)
    click.echo(f"wrote {out}; next: dra-conformance profile check {out}", err=True)


@profile.command("schema")
def profile_schema() -> None:
    """Print the profile's JSON Schema (the published file is conformance/implementation/profile.schema.json)."""
    import json

    from conformance.implementation.profile import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


def _probe_check(prof: Profile, url: str, ca_file: str | None, kubeconfig: Path | None) -> list[str]:
    """The probe's answer against the profile (and the cluster's pools): errors; notes are printed."""
    from kubernetes import client, config

    from conformance.suite.probecheck import probe_problems, read_probe

    try:
        body = read_probe(url, ca_file)
    except (OSError, ValueError) as exc:
        return [f"--probe-url {url}: no answer: {exc}"]
    slices = None
    if kubeconfig is not None:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        objects = client.CustomObjectsApi(api)
        slices = objects.list_cluster_custom_object("resource.k8s.io", "v1", "resourceslices")["items"]
    errors, notes = probe_problems(prof, body, slices)
    for note in notes:
        click.echo(f"  probe: {note}")
    return [f"probe {url}: {e}" for e in errors]


@profile.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--probe-url", default=None, help="a running fabric probe: check its answer (and the model rule)")
@click.option("--probe-ca-file", default=None, type=click.Path(exists=True, dir_okay=False), help="its CA (https)")
@click.option(
    "--kubeconfig",
    default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --probe-url: a cluster where the stack publishes, to compare the pools' modelAttribute values",
)
def profile_check(file: Path, probe_url: str | None, probe_ca_file: str | None, kubeconfig: Path | None) -> None:
    """Validate FILE, check its placeholders and files, and say what each requirement will do with it.

    Exit status: 0 usable, 1 problems found (listed), 2 bad usage.
    """
    from conformance.implementation.profile import ProfileError, load_profile
    from conformance.suite.profilecheck import check

    try:
        loaded = load_profile(file)
    except ProfileError as exc:
        raise click.ClickException(str(exc)) from None
    result = check(loaded)
    if probe_url:
        result.errors += _probe_check(loaded.profile, probe_url, probe_ca_file, kubeconfig)
    prof = loaded.profile
    click.echo(f"profile {prof.name} {prof.version} ({loaded.path})")
    entries = f", fabric entries {prof.fabric_entries}" if prof.has_fabric else " (no fabric)"
    click.echo(f"  driver {prof.driver}, {prof.binding_model}{entries}")
    click.echo(
        f"  bindingTimeout of a cluster the suite starts: {prof.binding_timeout_s()}s (--binding-timeout overrides)"
    )
    for warning in result.warnings:
        click.echo(f"  warning: {warning}")
    for error in result.errors:
        click.echo(f"  error: {error}", err=True)
    click.echo("requirements with this profile:")
    for row in result.plan:
        click.echo(f"  {row.requirement:8} {row.level:6} {row.action:14} {row.reason}")
    runs = sum(r.action in ("run", "fail") for r in result.plan)
    apart = sum(r.action == "not-applicable" for r in result.plan)
    if apart:
        click.echo(
            f"{apart} requirements are not applicable to bindingModel {prof.binding_model}: not run, counted out of "
            f"the verdict (it says so: e.g. success ({apart} requirements not applicable to bindingModel "
            f"{prof.binding_model}))"
        )
    click.echo(
        f"{runs} of {len(result.plan)} requirements will run; a run may still skip one for what only the cluster "
        "shows (its release, a node it cannot add) and says why then; what the implementation owes (devices, reach) "
        "is never skipped: missing after promises.publishSeconds it fails; what each one checks, per design: the "
        "requirement reference (`make docs`, site/reference/requirements.html)"
    )
    for line in result.verdict:  # last: the verdicts and exit status the run would get, and why
        click.echo(line)
    if result.errors:
        raise click.ClickException(f"{len(result.errors)} problem(s) in {file}")
