"""``fake-fabric-manager``: start the fabric manager HTTP service."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from .config import ConfigError, load_config
from .manager import FabricManager
from .server import DEFAULT_HOST, build_server
from .store import InventoryError, Store, StoreInUseError

DEFAULT_PORT = 8790


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "-c",
    "config_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Fabric YAML (fabrics, their nodes, device models and counts).",
)
@click.option("--db", type=click.Path(dir_okay=False), help="SQLite state file. Default: 'database' in the config.")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to bind; keep loopback (no auth).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="0: pick free.")
@click.option(
    "--port-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the bound port here once the server listens (for harnesses using --port 0).",
)
@click.option("--attach-seconds", type=click.FloatRange(0, 3600), help="Time one attach takes (config: attachSeconds).")
@click.option("--detach-seconds", type=click.FloatRange(0, 3600), help="Time one detach takes (config: detachSeconds).")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
@click.option("--access-log/--no-access-log", default=True, show_default=True)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="Serve HTTPS with this certificate.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="The key of --tls-cert.")
@click.version_option(package_name="dra-fake-drivers")
def main(
    config_path: Path,
    db: str | None,
    host: str,
    port: int,
    port_file: Path | None,
    attach_seconds: float | None,
    detach_seconds: float | None,
    log_level: str,
    access_log: bool,
    tls_cert: str | None,
    tls_key: str | None,
) -> None:
    """Fake PCIe/CXL fabric manager: attach/detach fabric devices to nodes, with persistent state and faults."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("give --tls-cert and --tls-key together")
    try:
        config = load_config(config_path)
        database = db or (str(config.database) if config.database else None)
        if database is None:
            raise click.UsageError("no state database: pass --db or set 'database' in the config")
        manager = FabricManager(config, Store(database), attach_seconds=attach_seconds, detach_seconds=detach_seconds)
    except (ConfigError, InventoryError, StoreInUseError) as exc:
        raise click.ClickException(str(exc)) from None

    server = build_server(
        manager,
        host=host,
        port=port,
        port_file=port_file,
        log_level=log_level,
        access_log=access_log,
        announce=True,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
    click.echo(
        f"fake fabric manager: {len(config.devices)} devices on {len(config.fabrics)} fabrics, "
        f"attach {manager.attach_seconds:g} s, detach {manager.detach_seconds:g} s, state {database}"
    )
    try:
        server.run()
    finally:
        manager.close()
    if not server.started:
        raise SystemExit(1)
