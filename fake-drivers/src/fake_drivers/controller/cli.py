"""``reference-controller``: run the reference composable controller against a cluster and a fabric manager."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import click
from kubernetes import config
from kubernetes.client import ApiClient

from ..dra import served_version
from ..signals import stop_event
from .fabric import FabricClient
from .kube import CLAIMS, SLICES, TAINTS, Kube
from .metrics import Metrics
from .reconciler import ATTACH_WORKERS, Caches, Reconciler
from .roles import Role
from .settings import DEFAULT_DRIVER, DEFAULT_NODE_LABEL, FabricEntries, Mode, Settings
from .watch import Cache

log = logging.getLogger("reference-controller")

# Hidden flags, BROKEN ON PURPOSE: only the suite's selftests use them, to show a scenario catches the breakage.
BROKEN_FLAGS = {
    "--broken-report-before-attach": "IMP-3: binding condition True before the attach completes",
    "--broken-offer-failed-device": "IMP-4: report an attach failure but keep the failed device offered",
    "--broken-never-detach": "IMP-5: released devices stay attached and out of the pool",
    "--broken-no-failure-condition": "SCH-5/IMP-4: no failure condition on an attach failure; the claim stays pending",
    "--broken-forget-on-restart": "IMP-8: attaches found at start are never reported; their pods never bind",
    "--broken-detach-while-used": "IMP-10: a device is detached about a second after its claim is ready",
    "--broken-report-while-attaching": "IMP-11: attached reported as soon as the attach is in flight",
    "--broken-keep-unready-attach": "IMP-12: a device whose claim went away before it was ready stays attached",
    "--broken-detach-all-on-restart": "IMP-10: at start, every attached device is detached, also those in use",
    "--broken-report-on-fabric-error": "IMP-15: an attach the fabric answered with an error is reported attached",
    "--broken-keep-on-deleted-node": "IMP-16: a device left on a deleted node is never detached",
    "--broken-abort-on-other-driver": "IMP-17: once it meets an allocated claim of another driver with binding "
    "conditions, every reconcile pass aborts (CoHDI's scaler on a pool it did not know)",
    "--broken-abort-pass-on-other-driver": "IMP-17: every reconcile pass that meets an allocated claim of another "
    "driver with binding conditions aborts; passes work again once none is left (CoHDI's scaler, pass by pass)",
    "--broken-report-all-on-first": "IMP-18: once one device of a claim is reported, all its devices are",
    "--broken-accept-attached-elsewhere": "IMP-19: a device attached to another node is reported, not moved "
    "(counted: a device idle on another node is given to an entry)",
    "--broken-detach-shared-early": "IMP-20: a shared claim's device is detached once one of its pods is gone",
    "--broken-late-quarantine": "IMP-4: a failed device is hidden only 10 s after its failure is reported",
    "--broken-reassign-failed-device": "IMP-4: counted: a device whose attach failed is given to the next entry",
    "--broken-detach-first-only": "IMP-5: a released claim of several devices gets only its first device detached",
    "--broken-forget-unsent-on-restart": "IMP-8: work decided but not yet sent to the fabric at start (an allocated "
    "claim's free device, an idle device due a detach) is kept in memory only and lost: never done",
    "--broken-forget-move-on-restart": "IMP-8: a device found at start attached to or detaching from another node "
    "than its claim's allocation is never moved",
    "--broken-early-reschedule": "COST-1/2: reschedule-to-local: the reschedule is asked for once the attach is done, "
    "without waiting for the node-local copy (a late copy: the scheduler allocates another fabric device)",
    "--broken-needless-reattach": "COST-2: an attached device is detached and attached again once before it is "
    "reported",
    "--broken-no-hold": "IMP-27: reschedule-to-local: no hold on the node-local copy, which is noticed (reschedule "
    "asked) only 2 s after it appears: meanwhile it is offered while the pending fabric allocation holds the device",
    "--broken-report-before-hiding": "IMP-4 (order): an attach failure is reported first and the failed device hidden "
    "1 s later, before the scheduler's next PreBind poll deallocates the claim",
    "--broken-detach-on-claim-delete": "IMP-10 (order): a claim being deleted no longer holds its device, which is "
    "detached at once although the pod using it still runs",
    "--broken-stale-attached": "IMP-28 (reuse): a device once seen attached is reported attached to every later "
    "claim that holds it, detached since or not, on its node or not",
    "--broken-forget-detach-on-restart": "IMP-8 (detach path): a detach found begun at start (the device's detach "
    "guard made: attached, detaching or free) is forgotten: never sent, or its guard never lifted",
    "--broken-reoffer-failed-on-restart": "IMP-8 (failure path): the quarantine rules found at start are taken for "
    "stale, deleted and the failures they record forgotten: the failed device offered again (--role publisher), "
    "attached again for its claim (attacher), never reported (conditions)",
    "--broken-detach-on-release": "NODE-4: a released device is detached (or moved) at once, while its node may "
    "still use it (a force-deleted pod whose container runs)",
}
# Broken modes that take a value (a FILE), hidden as the flags above.
BROKEN_VALUES = {
    "--broken-attachment-records": "IMP-8 (detach path): every attach is recorded in FILE and never removed; a "
    "restarted controller attaches again every free device FILE lists",
}


def broken_options(command: Callable[..., None]) -> Callable[..., None]:
    """One hidden flag per broken mode; each arrives as a keyword named like its Settings field."""
    for flag, what in reversed(BROKEN_FLAGS.items()):
        command = click.option(flag, is_flag=True, hidden=True, help=f"BROKEN ON PURPOSE, selftests only ({what}).")(
            command
        )
    for flag, what in BROKEN_VALUES.items():
        command = click.option(flag, default="", hidden=True, help=f"BROKEN ON PURPOSE, selftests only ({what}).")(
            command
        )
    return command


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="Credentials of the controller's ServiceAccount (not an admin's).",
)
@click.option("--fabric-manager", required=True, help="Base URL of the fabric manager, e.g. http://127.0.0.1:8790.")
@click.option("--fabric-ca", type=click.Path(exists=True, dir_okay=False), help="CA of an https fabric manager.")
@click.option("--driver", default=DEFAULT_DRIVER, show_default=True, help="DRA driver name of the fabric devices.")
@click.option(
    "--mode",
    type=click.Choice([m.value for m in Mode]),
    default=Mode.KEEP_IN_POOL.value,
    show_default=True,
    help="keep-in-pool: the claim keeps the fabric copy (node driver with --deny-list); "
    "reschedule-to-local: move the claim to the node-local copy (node driver with --republish).",
)
@click.option(
    "--fabric-entries",
    type=click.Choice([e.value for e in FabricEntries]),
    default=FabricEntries.IDENTIFIED.value,
    show_default=True,
    help="identified: one pool entry per physical device (name, uuid); counted: per model, interchangeable "
    "entries without identity, any free device of the model is attached (needs --mode reschedule-to-local).",
)
@click.option(
    "--node-label",
    default=DEFAULT_NODE_LABEL,
    show_default=True,
    help="Node label whose value is the fabric id: a fabric pool reaches the nodes labelled with its id.",
)
@click.option(
    "--idle-grace",
    type=click.FloatRange(0),
    default=10.0,
    show_default=True,
    help="Seconds an attached device nobody holds stays attached before it is detached.",
)
@click.option(
    "--taint-settle",
    type=click.FloatRange(0),
    default=1.0,
    show_default=True,
    help="Seconds between hiding a device and re-checking the claims before detaching it.",
)
@click.option(
    "--quarantine",
    type=click.FloatRange(0),
    default=60.0,
    show_default=True,
    help="Seconds a device whose attach failed is not offered.",
)
@click.option(
    "--max-reschedules",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="reschedule-to-local: rounds per claim before it keeps its fabric copy.",
)
@click.option(
    "--poll",
    type=click.FloatRange(0.05),
    default=1.0,
    show_default=True,
    help="Seconds between passes when nothing is watched to change (fabric state, timers).",
)
@click.option(
    "--resync",
    type=click.FloatRange(1),
    default=30.0,
    show_default=True,
    help="Seconds after which every watch lists its objects again.",
)
@click.option(
    "--attach-workers",
    type=click.IntRange(1, 1000),
    default=ATTACH_WORKERS,
    show_default=True,
    help="Fabric attaches/detaches run in parallel (each blocks for the fabric's operation time).",
)
@click.option(
    "--metrics-address",
    default="127.0.0.1:0",
    show_default=True,
    help="host:port of /metrics (port 0 picks a free port); empty: no metrics server.",
)
@click.option(
    "--metrics-port-file", type=click.Path(dir_okay=False, path_type=Path), help="Write the bound metrics port here."
)
@click.option(
    "--remove-on-stop/--keep-on-stop",
    default=False,
    show_default=True,
    help="On SIGTERM/SIGINT, delete the fabric pools and taint rules this controller wrote (an uninstall; roles all "
    "and publisher only); by default they stay so that a restarted controller carries on (a rolling update must "
    "not offer hidden devices).",
)
@click.option(
    "--role",
    type=click.Choice([r.value for r in Role]),
    default=Role.ALL.value,
    show_default=True,
    help="The share of the work this process does; three processes with publisher, attacher and conditions split "
    "it as real stacks do, coordinating only through the Kubernetes API and the fabric manager (see roles.py).",
)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info", show_default=True)
@broken_options
def main(
    kubeconfig: str,
    fabric_manager: str,
    fabric_ca: str | None,
    driver: str,
    mode: str,
    fabric_entries: str,
    node_label: str,
    idle_grace: float,
    taint_settle: float,
    quarantine: float,
    max_reschedules: int,
    poll: float,
    resync: float,
    attach_workers: int,
    metrics_address: str,
    metrics_port_file: Path | None,
    remove_on_stop: bool,
    role: str,
    log_level: str,
    **broken: bool | str,
) -> None:
    """Publish the fabric pools, attach before bind, report binding conditions, detach on release."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("kubernetes", "httpx", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        settings = Settings(
            driver,
            Mode(mode),
            node_label,
            idle_grace,
            taint_settle,
            quarantine,
            max_reschedules,
            FabricEntries(fabric_entries),
            **broken,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    for flag in settings.broken_modes():
        what = BROKEN_FLAGS.get(flag) or BROKEN_VALUES[flag]
        log.warning("BROKEN MODE, on purpose, for selftests only: %s (%s)", flag, what)
    own_role = Role(role)
    remove_on_stop = remove_on_stop and own_role.removes_on_stop  # the pools' owner uninstalls them, once
    stop = stop_event(
        log,
        "stopping; removing the fabric pools and taint rules"
        if remove_on_stop
        else "stopping (slices, rules and attachments stay; a restart carries on)",
    )

    def client() -> ApiClient:
        return config.new_client_from_config(config_file=kubeconfig)  # one per thread: watches hold a connection

    metrics = Metrics()
    if metrics_address:
        host, _, port = metrics_address.rpartition(":")
        bound = metrics.serve(host or "127.0.0.1", int(port))
        log.info("metrics on http://%s:%d/metrics", host or "127.0.0.1", bound)
        if metrics_port_file:
            tmp = metrics_port_file.with_suffix(".tmp")
            tmp.write_text(str(bound))
            tmp.replace(metrics_port_file)
    taint_version = served_version(client(), TAINTS)
    kube = Kube(client(), settings, taint_version)
    fabric = FabricClient(fabric_manager, connections=attach_workers + 2, ca_file=fabric_ca)  # + the reconciler's reads
    reconciler = Reconciler(settings, kube, fabric, metrics, poll_s=poll, workers=attach_workers, role=own_role)
    own = kube.own_selector()
    reconciler.caches = Caches(
        claims=Cache(client(), CLAIMS, reconciler.wake, stop, resync_s=resync),
        slices=Cache(client(), SLICES, reconciler.wake, stop, resync_s=resync, field_selector=f"spec.driver={driver}"),
        taints=Cache(
            client(), TAINTS, reconciler.wake, stop, resync_s=resync, label_selector=own, version=taint_version
        ),
    )
    for cache in reconciler.caches.all():
        cache.start()
    try:
        reconciler.run(stop)
        if remove_on_stop and stop.is_set():  # the reconciler has returned: nothing writes them again
            slices, rules = kube.remove_own()
            log.info("removed %d fabric pool slices and %d taint rules", slices, rules)
    finally:
        fabric.close()
    log.info("stopped")


if __name__ == "__main__":
    main()
