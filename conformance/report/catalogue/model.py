"""The catalogue's shared model: the Requirement, Applies and Doc records, the binding models and designs they name,
the helpers and KEP sections the family modules write their entries with, and the assembled DOCS and APPLIES tables
that Requirement.doc and .applies read (filled by the package's __init__ from the family modules)."""

from __future__ import annotations

from dataclasses import dataclass, field

KEP_URL = (
    "https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/5007-device-attach-before-pod-scheduled"
)


@dataclass(frozen=True)
class Requirement:
    id: str
    area: str
    level: str  # MUST or SHOULD
    title: str
    kep_section: str
    # Which run judges it: the suite (pytest: `dra-conformance run`, `make conformance`), or `dra-conformance
    # lifecycle` (LIFECYCLE: it switches gates and releases of a cluster of its own, which no suite run may do to the
    # cluster its scenarios share). A suite run's reports list only the suite's.
    judged_by: str = "suite"

    @property
    def doc(self) -> Doc | None:
        """What the suite checks for this requirement (None: not written yet, which a unit test refuses)."""
        return DOCS.get(self.id)

    @property
    def applies(self) -> Applies | None:
        """The binding models it applies to (None: every model)."""
        return APPLIES.get(self.id)

    def not_applicable(self, model: str | None) -> str | None:
        """Why the requirement does not apply to a profile of bindingModel `model`, or None (it applies; so does
        every requirement to a run without a profile). Its tests are then not run, and it is reported `not-applicable`:
        neither passed nor skipped, counted out of the verdict."""
        applies = self.applies
        if model is None or applies is None or model in applies.models:
            return None
        if applies.models == FABRIC_MODELS:
            return f"fabric-only: bindingModel {model} has no fabric ({applies.why})"
        return f"not applicable to bindingModel {model}: only to {', '.join(sorted(applies.models))} ({applies.why})"


# The profile's binding models (implementation/profile/model.py BINDING_MODELS; a unit test keeps them equal).
BINDING_MODELS = ("keep-in-pool", "reschedule-to-local", "node-local")
FABRIC_MODELS = frozenset({"keep-in-pool", "reschedule-to-local"})  # devices reached through a fabric


@dataclass(frozen=True)
class Applies:
    """The binding models a requirement applies to, and what it judges that the others lack."""

    models: frozenset[str]
    why: str


def _fabric(why: str) -> Applies:
    return Applies(FABRIC_MODELS, why)


def _gate(fabric: str) -> Applies:
    """A requirement of the node-local readiness gate; `fabric`: the requirements that judge a fabric's gate."""
    return Applies(
        frozenset({"node-local"}), f"it judges a node-local readiness gate; a fabric's is its attach: {fabric}"
    )


# The designs an implementation may have (profile bindingModel x fabricEntries) that the requirement reference tells
# apart: what a requirement's check asks of each, where that differs (Doc.models).
DESIGNS: dict[str, str] = {
    "keep-in-pool": "keep-in-pool, identified entries",
    "reschedule-to-local": "reschedule-to-local, identified entries",
    "counted": "reschedule-to-local, counted entries",
    "node-local": "node-local readiness gate (no fabric)",
}


@dataclass(frozen=True)
class Doc:
    """The reference text of a requirement. `checks`: what its scenario does and what it asserts, whatever the design;
    `models`: per design (DESIGNS keys) what that design must show, where it differs; `skips`: what besides the
    profile's declarations (read from the scenario records) makes it skip: the release, the cluster, the devices."""

    checks: str
    models: dict[str, str] = field(default_factory=dict)
    skips: str = ""


# What the suite checks per requirement, and the requirements that apply to some binding models only (absent: every
# model): the family modules (base.py .. scale.py) keep each entry beside its requirement; the package's __init__
# fills these two tables from them, in catalogue order. They live here, not there, because Requirement reads them and
# the family modules import this one.
#
# Applicability is decided from what each requirement means: an attach, a detach, the fabric's truth, a fabric entry
# and its node-local copy exist only where a fabric does. A node-local readiness gate (bindingModel node-local) has its
# own requirements for what it owes instead (readiness before the conditions, failure conditions, the writer's
# restarts). What applies to every model: IMP-9 (least privilege), IMP-17 (other drivers), SCALE-1 (many pods in
# PreBind), NODE-1 and NODE-2 (the kubelet path).
DOCS: dict[str, Doc] = {}
APPLIES: dict[str, Applies] = {}


SUITE, LIFECYCLE = "suite", "lifecycle"


def _r(id_: str, area: str, level: str, title: str, section: str, judged_by: str = SUITE) -> Requirement:
    return Requirement(id_, area, level, title, section, judged_by)


_API, _SCH, _IMP = "Design Details / API", "Design Details / Scheduler", "Design Details / Composable controller"
# Skip texts more than one family shares.
_FIXED_TIMEOUT = "a release whose binding timeout is fixed (1.34: 600 s) cannot be waited out: skipped with that reason"
_NO_NODE = "no schedulable Ready node without NoSchedule taints (or none told apart by hostname): skipped, said so"
