"""What an operator configures, and the condition and taint names derived from the driver name."""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, fields

DEFAULT_DRIVER = "gpu.fabric.example.com"
DEFAULT_NODE_LABEL = "conformance.dra.example.com/fabric"
MANAGER = "reference-controller"
# Labels on what the controller writes; DRIVER_LABEL keeps controllers of different drivers apart.
DRIVER_LABEL = "fake-drivers.example.com/driver"
FABRIC_LABEL = "fake-drivers.example.com/fabric"
PURPOSE_LABEL = "fake-drivers.example.com/purpose"
DEVICE_LABEL = "fake-drivers.example.com/device-uuid"


class Mode(enum.StrEnum):
    # Seed proposal 1: the claim keeps the fabric copy; the node driver's deny list hides the hot-plugged copy.
    KEEP_IN_POOL = "keep-in-pool"
    # Real composable systems: once the node driver republishes the device, fail with "reschedule" so the
    # scheduler reallocates, picking the node-local copy (node-local pools are tried first).
    RESCHEDULE_TO_LOCAL = "reschedule-to-local"


class FabricEntries(enum.StrEnum):
    # Every fabric pool entry is one physical device (name and uuid attribute of the fabric manager's device).
    IDENTIFIED = "identified"
    # Count-based pools (the CoHDI design): entries per model, interchangeable, no physical identity; the
    # controller attaches ANY free device of the model and the identity shows only on the node-local copy.
    COUNTED = "counted"


class Purpose(enum.StrEnum):
    """Why a device carries a NoSchedule DeviceTaintRule. One rule per purpose and device."""

    QUARANTINE = "quarantine"  # its attach failed: not offered again until the quarantine ends
    HOLD = "hold"  # reschedule-to-local: its node-local copy must not be taken while a claim holds the fabric copy
    DETACH = "detach"  # idle: hidden first, detached after the taint had time to reach the scheduler


@dataclass(frozen=True)
class Settings:
    driver: str = DEFAULT_DRIVER
    mode: Mode = Mode.KEEP_IN_POOL
    node_label: str = DEFAULT_NODE_LABEL
    # An attached device nobody holds stays attached this long (reuse on that node is free; in
    # reschedule-to-local the rescheduled claim needs it), then it is hidden and detached.
    idle_grace_s: float = 10.0
    # Time between creating a detach guard and re-checking the claims: lets the scheduler's informer see the
    # taint and an allocation it had in flight reach the API.
    taint_settle_s: float = 1.0
    # A device whose attach failed is not offered for this long.
    quarantine_s: float = 60.0
    # reschedule-to-local: how often one claim is sent back to the scheduler. The scheduler does not steer a
    # reallocation to the node of the node-local copy (no scoring for it; the nominated node is cleared), so a
    # claim can land on another fabric device; after this many rounds it keeps its fabric copy instead.
    max_reschedules: int = 1
    # counted needs reschedule-to-local: a claim cannot keep a count entry's device across the republish
    # (nothing would tell the node driver that the node-local copy is taken).
    fabric_entries: FabricEntries = FabricEntries.IDENTIFIED
    # Deliberately broken mode for the suite's own tests (never a default): report the binding condition True
    # as soon as the attach starts, so the conformance scenarios can be shown to catch it.
    broken_report_before_attach: bool = False
    # More broken modes, each breaking one requirement of the catalogue (cli.BROKEN_FLAGS); all off by default.
    broken_offer_failed_device: bool = False
    broken_never_detach: bool = False
    broken_no_failure_condition: bool = False
    broken_forget_on_restart: bool = False
    broken_detach_while_used: bool = False
    broken_report_while_attaching: bool = False
    broken_keep_unready_attach: bool = False
    broken_detach_all_on_restart: bool = False
    broken_report_on_fabric_error: bool = False
    broken_keep_on_deleted_node: bool = False
    broken_abort_on_other_driver: bool = False
    broken_abort_pass_on_other_driver: bool = False
    broken_report_all_on_first: bool = False
    broken_accept_attached_elsewhere: bool = False
    broken_detach_shared_early: bool = False
    broken_late_quarantine: bool = False
    broken_reassign_failed_device: bool = False
    broken_detach_first_only: bool = False
    broken_forget_unsent_on_restart: bool = False
    broken_forget_move_on_restart: bool = False
    broken_early_reschedule: bool = False
    broken_needless_reattach: bool = False
    broken_no_hold: bool = False
    broken_report_before_hiding: bool = False
    broken_detach_on_claim_delete: bool = False
    broken_forget_detach_on_restart: bool = False
    broken_stale_attached: bool = False
    broken_reoffer_failed_on_restart: bool = False
    # --broken-attachment-records FILE: every attach done is recorded in FILE and never removed; a restarted controller
    # attaches again every free device the file lists (a stale desired-state record, as a stack's CRD left behind).
    broken_attachment_records: str = ""
    broken_detach_on_release: bool = False

    def __post_init__(self) -> None:
        if self.counted and self.mode is not Mode.RESCHEDULE_TO_LOCAL:
            raise ValueError("fabric entries 'counted' need mode reschedule-to-local")

    @property
    def counted(self) -> bool:
        return self.fabric_entries is FabricEntries.COUNTED

    def broken_modes(self) -> list[str]:
        """The deliberately broken modes that are on, as their flags (--broken-...), for the warning at start."""
        return [
            "--" + f.name.replace("_", "-")
            for f in fields(self)
            if f.name.startswith("broken_") and getattr(self, f.name)
        ]

    @property
    def attached(self) -> str:
        return f"{self.driver}/attached"

    @property
    def attach_failed(self) -> str:
        return f"{self.driver}/attach-failed"

    @property
    def reschedule(self) -> str:
        return f"{self.driver}/reschedule"

    @property
    def binding_conditions(self) -> list[str]:
        return [self.attached]

    @property
    def failure_conditions(self) -> list[str]:
        return [self.attach_failed, self.reschedule]

    def taint_key(self, purpose: Purpose) -> str:
        return f"{self.driver}/{purpose.value}"

    def taint_rule_name(self, purpose: Purpose, uuid: str) -> str:
        # Cluster-scoped: the driver hash keeps controllers of different drivers (same fabric uuids) apart.
        return f"{purpose.value}-{hashlib.sha256(self.driver.encode()).hexdigest()[:8]}-{uuid}"
