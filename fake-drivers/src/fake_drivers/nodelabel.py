"""Label nodes late: a stand-in for a stack that puts the labels its fabric pools select on onto the nodes only some
time after it started (CoHDI's scaler did so 47 s late). For the suite's selftests: run with a reference controller
whose --node-label is the `--to` key, the fabric pools reach no node until this has run.

    python -m fake_drivers.nodelabel --kubeconfig K --after 20 \\
        --copy conformance.dra.example.com/fabric=late.example.com/fabric

After `--after` seconds every node with the `from` label gets the `to` label with the same value; on SIGTERM the
labels it added are removed again.
"""

from __future__ import annotations

import logging

import click
from kubernetes import client, config

from .signals import stop_event

log = logging.getLogger("fake-node-labeller")


def _patch(core: client.CoreV1Api, node: str, key: str, value: str | None) -> None:
    core.patch_node(node, {"metadata": {"labels": {key: value}}})


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--after", type=click.FloatRange(0), required=True, help="Seconds to wait before labelling.")
@click.option("--copy", "copy_", required=True, help="FROM=TO: copy the value of node label FROM to label TO.")
def main(kubeconfig: str, after: float, copy_: str) -> None:
    logging.basicConfig(level="INFO", format="%(asctime)s %(name)s %(levelname)s %(message)s")
    source, _, target = copy_.partition("=")
    if not source or not target:
        raise click.UsageError("--copy takes FROM=TO (two label keys)")
    core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    stop = stop_event(log, "removing the labels it added")
    log.info("labelling nodes %s from %s in %.0fs", target, source, after)
    added: list[str] = []
    if not stop.wait(after):
        for node in core.list_node().items:
            value = (node.metadata.labels or {}).get(source)
            if value is not None and (node.metadata.labels or {}).get(target) != value:
                _patch(core, node.metadata.name, target, value)
                added.append(node.metadata.name)
        log.info("labelled %d nodes %s: %s", len(added), target, ", ".join(added))
    stop.wait()
    for name in added:
        try:
            _patch(core, name, target, None)
        except client.ApiException as exc:
            if exc.status != 404:  # a node the suite added and deleted meanwhile
                raise
    log.info("removed %s from %d nodes", target, len(added))


if __name__ == "__main__":
    main()
