"""`fake-node-driver`: one process publishing the node-local slices of every configured node, or (`--node`) of one.

kwok nodes have no kubelet, so no per-node plugin runs there: by default one process serves all nodes of the local
cluster. With --node NAME it is that node's plugin, as a DaemonSet pod would be (one process per node, the harness's
perNode): its slices only, owned by the Node (removed with it by the garbage collector), under a credential that
may be bound to a pod on that node. It polls the fabric manager (hot-plug) and rewrites a node's slice only when its
content changes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import click
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ..nodes import NodeLister
from ..signals import stop_event
from ..validation import ConfigError
from .config import load_config
from .fabric import FabricClient, FabricUnavailable
from .publisher import Publisher
from .slices import AttachedDevice, Policy

SERVE_ALL = "serving every configured node"  # what a refused node list costs
log = logging.getLogger("fake-node-driver")


@click.command()
@click.option("--kubeconfig", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="nodes and their local devices (YAML)",
)
@click.option("--fabric-manager", required=True, help="base URL of the fabric manager, e.g. http://127.0.0.1:8790")
@click.option("--fabric-ca", type=click.Path(exists=True, dir_okay=False), help="CA of an https fabric manager")
@click.option("--driver", default=None, help="DRA driver name (default: from the config)")
@click.option(
    "--republish/--no-republish",
    default=True,
    show_default=True,
    help="advertise fabric devices hot-plugged into a node",
)
@click.option(
    "--deny-list/--no-deny-list",
    default=False,
    show_default=True,
    help="do not advertise a hot-plugged device while the fabric pool still offers it",
)
@click.option("--node", default=None, help="serve this node only (a per-node plugin; not configured: no local devices)")
@click.option(
    "--hotplug-delay",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    help="seconds a device must have been attached before it is advertised (a slow hot-plug detection, as a node "
    "whose driver takes a while to load; selftests use it to show a controller that does not wait for the copy)",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=0.5,
    show_default=True,
    help="seconds between polls of the fabric manager",
)
def main(
    kubeconfig: str,
    config_path: str,
    fabric_manager: str,
    fabric_ca: str | None,
    driver: str | None,
    republish: bool,
    deny_list: bool,
    node: str | None,
    hotplug_delay: float,
    interval: float,
) -> None:
    """Publish per-node ResourceSlices with local devices and hot-plugged fabric devices."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if driver:
        cfg = type(cfg)(driver=driver, local=cfg.local)
    if node:
        cfg = type(cfg)(driver=cfg.driver, local={node: cfg.local.get(node, ())})
    api_client = config.new_client_from_config(config_file=kubeconfig)
    api = client.CustomObjectsApi(api_client)
    publisher = Publisher(api, cfg, Policy(republish=republish, deny_list=deny_list))
    core = client.CoreV1Api(api_client)
    nodes: Callable[[], frozenset[str] | None]
    if node:
        publisher.node, publisher.node_uid = node, core.read_node(node).metadata.uid
        nodes = _own_node_only  # its node exists while it runs: it stops with it
    else:
        nodes = NodeLister(lambda: frozenset(n.metadata.name for n in core.list_node().items), SERVE_ALL)
    fabric = FabricClient(fabric_manager, ca_file=fabric_ca)
    stop = stop_event(log, "removing slices and stopping")
    log.info("driver %s, nodes %s, republish=%s deny-list=%s", cfg.driver, cfg.nodes, republish, deny_list)
    try:
        run(publisher, fabric, stop, interval, nodes, HotplugDelay(hotplug_delay))
    finally:
        try:
            publisher.remove_all()
        except ApiException as exc:
            if not node:
                raise
            # its node is gone (and its credential with it): the garbage collector removes the owned slices
            log.warning(
                "cannot remove the slices of node %s (%s %s): left to their owner, the Node",
                node,
                exc.status,
                exc.reason,
            )
        fabric.close()


def _own_node_only() -> frozenset[str] | None:
    return None  # every configured node (its one node) is served


class HotplugDelay:
    """Advertise an attached device only once it has been seen attached to the same node for `seconds` (0: at once)."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self._since: dict[tuple[str, str], float] = {}

    def ready(self, attached: list[AttachedDevice], now: float) -> list[AttachedDevice]:
        if not self.seconds:
            return attached
        self._since = {(d.uuid, d.node): self._since.get((d.uuid, d.node), now) for d in attached}
        return [d for d in attached if now - self._since[(d.uuid, d.node)] >= self.seconds]


def run(
    publisher: Publisher,
    fabric: FabricClient,
    stop: threading.Event,
    interval: float,
    nodes: Callable[[], frozenset[str] | None] = lambda: None,
    delay: HotplugDelay | None = None,
) -> None:
    first = True
    delay = delay or HotplugDelay()
    while not stop.is_set():
        started = time.monotonic()
        try:
            publisher.sync(delay.ready(fabric.attached(), started), nodes())
            if first:
                log.info("published the slices of %d nodes", len(publisher.config.nodes))
                first = False
        except FabricUnavailable as exc:
            log.warning("%s; keeping the published slices", exc)
        except ApiException as exc:
            # 409: someone else wrote the slice in between; the next poll reads it again.
            log.warning("kubernetes API: %s %s", exc.status, exc.reason)
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


if __name__ == "__main__":
    main()
