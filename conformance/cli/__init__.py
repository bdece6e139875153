"""`dra-conformance`: build the binaries, run a local cluster by hand, measure it.

This module is the top-level group (`main`, the console entry point); each command group lives in its own module
and is registered here.
"""

from __future__ import annotations

import click

from conformance.cli import implementation, kind, lifecycle, local, matrix, profile, results, review, run, scale


@click.group()
def main() -> None:
    """KEP-5007 device binding conditions: conformance suite tooling."""


for command in (
    run.run_command,
    local.build,
    local.cluster,
    local.bench,
    scale.scale_command,
    kind.kind_config,
    kind.kind_group,
    kind.validate_kind_config,
    matrix.matrix_command,
    results.figures_command,
    results.soak_command,
    profile.profile,
    implementation.implementation,
    results.report_command,
    results.check_html,
    results.bundle_command,
    results.compare_command,
    review.review_command,
    lifecycle.lifecycle,
):
    main.add_command(command)
