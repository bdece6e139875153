"""The profile document: its version, binding model and fabric entries, the rules that hold across its parts, and
what the suite derives from it (bindingTimeout, the accounts IMP-9 judges, the roles IMP-8 restarts)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from conformance.cluster.versions import PREBIND_POLL_S
from conformance.implementation.names import qualified_name_problems
from conformance.implementation.profile.accounts import _SA_PLACEHOLDER, Right, ServiceAccount, Users
from conformance.implementation.profile.base import _Strict
from conformance.implementation.profile.promises import READ_SLACK_S, Promises, Published
from conformance.implementation.profile.stack import Controller, Endpoint, Hooks, Process, Role

BindingModel = Literal["keep-in-pool", "reschedule-to-local", "node-local"]
FabricEntries = Literal["identified", "counted"]
ConditionMeaning = Literal["reschedule", "failure"]
BINDING_MODELS: dict[str, str] = {
    "keep-in-pool": "the claim keeps the fabric device it was allocated; the pod binds on that allocation",
    "reschedule-to-local": "after the attach a failure condition that means 'reallocate' sends the claim back to the "
    "scheduler, and the pod binds on the node-local copy of the same physical device",
    "node-local": "a readiness gate without a fabric: node-local devices carry the binding conditions; the "
    "implementation (a controller or the node's daemon) readies the allocated device on its node (preparation, "
    "reprogramming), then sets them True, or a failure condition on a readiness failure. Nothing is attached: "
    "fabric-only requirements are not applicable",
}
# The binding models whose devices are reached through a fabric (attach, detach, fabric pools and their probe).
FABRIC_MODELS = frozenset({"keep-in-pool", "reschedule-to-local"})
FABRIC_ENTRIES: dict[str, str] = {
    "identified": "every fabric entry carries the identity attribute of one physical device",
    "counted": "fabric entries are interchangeable capacity per model (modelAttribute); a physical identity shows only "
    "on node-local copies (and in the fabric probe)",
}


def _choices(intro: str, meanings: dict[str, str]) -> str:
    """A field's description that lists what each of its values means."""
    return f"{intro}: " + "; ".join(f"`{value}`: {meaning}" for value, meaning in meanings.items())


# The capability of a stack that reports attach failures (the failure scenarios read it; promises.reportsFailures:
# false says the opposite).
FAILURE_REPORTING = "attachFailureReporting"
# The profile schema's version. A profile names it so that a later incompatible schema is refused with a clear
# message instead of being misread; the JSON Schema of this version is profile.schema.json (load.SCHEMA_FILE).
API_VERSION = "dra-conformance.example.com/v1alpha1"
KIND = "ImplementationProfile"
# bindingTimeout of the clusters the suite starts without an implementation profile (--profile none), and the least
# any profile gets (Profile.binding_timeout_s); --binding-timeout overrides both.
DEFAULT_BINDING_TIMEOUT_S = 20


class Profile(_Strict):
    api_version: Annotated[
        Literal["dra-conformance.example.com/v1alpha1"],
        Field(alias="apiVersion", description="the profile schema's version"),
    ]
    kind: Literal["ImplementationProfile"] = Field(description="always ImplementationProfile")
    name: str = Field(description="the implementation's name, as the reports show it")
    version: str = Field(description="the implementation's version, as the reports show it")
    url: str | None = Field(None, description="where the implementation is described (shown in the reports)")
    driver: str = Field(description="DRA driver name of the fabric devices (and their node-local copies)")
    # With fabricEntries: counted only the node-local copies (and the fabric probe) carry the identity.
    identity_attribute: Annotated[
        str,
        Field(
            alias="identityAttribute",
            description="the device attribute that names one physical device across pools (fabric entry, "
            "node-local copy, the fabric probe's `device`)",
        ),
    ] = "uuid"
    binding_model: Annotated[
        BindingModel,
        Field(alias="bindingModel", description=_choices("how a claim reaches its node", BINDING_MODELS)),
    ] = "keep-in-pool"
    fabric_entries: Annotated[
        FabricEntries,
        Field(alias="fabricEntries", description=_choices("what a fabric entry names", FABRIC_ENTRIES)),
    ] = "identified"
    model_attribute: Annotated[
        str,
        Field(alias="modelAttribute", description="counted entries: the attribute saying which model an entry is of"),
    ] = "model"
    # Names must be published by the driver's slices (checked at run time).
    failure_conditions: Annotated[
        dict[str, ConditionMeaning],
        Field(
            alias="failureConditions",
            description="what each bindingFailureConditions type means: `reschedule` (reallocate, e.g. onto the "
            "node-local copy: the happy path of reschedule-to-local) or `failure` (the attach failed); types not "
            "listed mean failure",
        ),
    ] = Field(default_factory=dict)
    manifests: list[str] = Field(
        default_factory=list,
        description="paths (placeholders allowed) applied before the hooks and processes, deleted after they stop",
    )
    processes: list[Process] = Field(
        default_factory=list,
        description="started in order once the cluster is up, stopped in reverse; empty for a stack already running",
    )
    fabric_probe: Annotated[
        Endpoint | None,
        Field(alias="fabricProbe", description="the fabric's truth: what is attached where (protocols page)"),
    ] = None
    fault_injector: Annotated[
        Endpoint | None,
        Field(alias="faultInjector", description="makes attaches and detaches fail, hang or slow (protocols page)"),
    ] = None
    readiness_probe: Annotated[
        Endpoint | None,
        Field(
            alias="readinessProbe",
            description="node-local readiness gate: per device, ready or not, on which node, since when (protocols "
            "page); the requirements judged on it are skipped without one",
        ),
    ] = None
    controller: Controller = Field(
        default_factory=Controller, description="the composable controller's process and ServiceAccount"
    )
    hooks: Hooks = Field(default_factory=Hooks, description="one-shot commands around the processes")
    published: Published = Field(
        default_factory=Published, description="the state the slices reach once the implementation has published"
    )
    fabric_concurrency: Annotated[
        int | None,
        Field(
            alias="fabricConcurrency",
            ge=1,
            description="at most this many implementation scenarios at once (1: one after another), for a stack "
            "that handles a bounded number of fabric operations; the run reports the resulting wall time",
        ),
    ] = None
    roles: list[Role] = Field(
        default_factory=list,
        description="the parts of the stack IMP-8 restarts; empty: controller.process as the one role",
    )
    service_accounts: Annotated[
        list[ServiceAccount],
        Field(
            alias="serviceAccounts",
            description="the stack's ServiceAccounts IMP-9 judges, besides controller.serviceAccount and those "
            "processes get with {sa_kubeconfig:NAMESPACE/NAME}",
        ),
    ] = Field(default_factory=list)
    rights: list[Right] = Field(
        default_factory=list,
        description="rights an account holds beyond IMP-9's minimum, each with its reason: declared, IMP-9 passes and "
        "prints them; undeclared, it fails",
    )
    promises: Promises = Field(default_factory=Promises, description="how long scenarios wait for an attach, a detach")
    capabilities: dict[str, bool] = Field(
        default_factory=dict,
        description="flags that select scenarios (the table below); `profile check` refuses one no scenario reads",
    )
    devices_per_claim: Annotated[
        int,
        Field(
            alias="devicesPerClaim",
            ge=2,
            le=32,
            description="devices one claim of the multi-device scenarios asks for (IMP-18; bounded at run time by the "
            "fabric devices reaching one node), split over two requests where the scenario asks for two",
        ),
    ] = 4

    @model_validator(mode="after")
    def _model_is_consistent(self) -> Profile:
        for condition in self.failure_conditions:
            problems = qualified_name_problems(condition)
            if problems:
                raise ValueError(
                    f"failureConditions: {condition!r} is not a condition type the API accepts: {'; '.join(problems)}"
                )
        if self.binding_model == "reschedule-to-local" and "reschedule" not in self.failure_conditions.values():
            raise ValueError(
                "bindingModel reschedule-to-local needs failureConditions to name the condition that means "
                "'reschedule' (e.g. {<driver>/reschedule: reschedule})"
            )
        if self.binding_model == "node-local":
            problems = self._fabric_fields_set()
            if problems:
                raise ValueError(
                    "bindingModel node-local has no fabric (node-local devices carry the binding conditions; nothing "
                    f"is attached): {'; '.join(problems)}"
                )
        return self

    def _fabric_fields_set(self) -> list[str]:
        """What a node-local profile sets that only a fabric has a meaning for."""
        out = []
        if self.fabric_entries == "counted":
            out.append("fabricEntries: counted describes fabric entries (leave fabricEntries out)")
        if self.fabric_probe is not None:
            out.append("fabricProbe reports attachments, which a node-local device never has (leave it out)")
        if self.published.per_model:
            out.append(
                "published.perModel counts counted fabric entries (leave it out; fabricDevices counts the "
                "node-local devices with binding conditions)"
            )
        reschedule = sorted(c for c, meaning in self.failure_conditions.items() if meaning == "reschedule")
        if reschedule:
            out.append(
                f"failureConditions {reschedule} mean 'reschedule' onto a node-local copy, which only a fabric "
                "device has; a condition that reallocates after a readiness failure means `failure`"
            )
        return out

    @property
    def has_fabric(self) -> bool:
        """Whether the binding model reaches its devices through a fabric (attach, detach, fabric pools)."""
        return self.binding_model in FABRIC_MODELS

    def binding_timeout_s(self) -> int:
        """The scheduler's bindingTimeout a cluster the suite starts gets for this profile: long enough for what the
        implementation promises — its attach and two PreBind polls, per scheduling round (two for
        reschedule-to-local) — and never below DEFAULT_BINDING_TIMEOUT_S. A timeout shorter than the promise would fail
        a correct implementation for being as slow as it said it would be."""
        rounds = 2 if self.binding_model == "reschedule-to-local" else 1
        return max(DEFAULT_BINDING_TIMEOUT_S, math.ceil(rounds * (self.promises.attach_s + 2 * PREBIND_POLL_S)))

    def meaning(self, condition: str) -> ConditionMeaning:
        """What a True bindingFailureCondition of this type means; undeclared types mean failure."""
        return self.failure_conditions.get(condition, "failure")

    @model_validator(mode="after")
    def _read_outlasts_promise(self) -> Profile:
        timeout = self.published.timeout_s
        if timeout is not None and timeout < self.promises.publish_s:
            raise ValueError(
                f"published.timeoutSeconds ({timeout:g}) is shorter than promises.publishSeconds "
                f"({self.promises.publish_s:g}): the device read must wait at least as long as the promise"
            )
        return self

    def read_timeout_s(self) -> float:
        """How long the device read waits in all (published.timeoutSeconds, default the promise + READ_SLACK_S)."""
        return self.published.timeout_s or self.promises.publish_s + READ_SLACK_S

    @model_validator(mode="after")
    def _failure_reporting_is_consistent(self) -> Profile:
        if not self.promises.reports_failures and self.capabilities.get(FAILURE_REPORTING):
            raise ValueError(
                f"promises.reportsFailures: false says the stack never sets its failure conditions; "
                f"capabilities.{FAILURE_REPORTING}: true claims it does: one of them"
            )
        return self

    @model_validator(mode="after")
    def _controller_process_exists(self) -> Profile:
        names = [p.name for p in self.processes]
        if self.controller.process is not None and self.controller.process not in names:
            raise ValueError(f"controller.process {self.controller.process!r} is not one of the processes {names}")
        return self

    @model_validator(mode="after")
    def _roles_name_processes(self) -> Profile:
        names = [p.name for p in self.processes]
        for role in self.roles:
            if role.process is not None and role.process not in names:
                raise ValueError(f"roles: {role.name!r} names process {role.process!r}, not one of {names}")
        if len({r.name for r in self.roles}) != len(self.roles):
            raise ValueError(f"role names must be unique: {[r.name for r in self.roles]}")
        return self

    def _account_uses(self) -> list[tuple[str, str, bool, bool]]:
        """(account, what runs as it, central, per node) for each use: serviceAccounts, controller.serviceAccount and
        the accounts whose token a process the suite starts is given ({sa_kubeconfig:...}, {pod_kubeconfig:...})."""
        uses = [
            (entry.account, entry.role or "", entry.runs != "per-node", entry.runs != "central")
            for entry in self.service_accounts
        ]
        if self.controller.service_account:
            uses.append((self.controller.service_account, "controller", True, False))
        for process in self.processes:
            for text in [process.kubeconfig, *process.command, *process.env.values()]:
                for account in _SA_PLACEHOLDER.findall(text):
                    uses.append((account, f"process {process.name}", not process.per_node, process.per_node))
        return uses

    def accounts(self) -> dict[str, str]:
        """Every ServiceAccount of the stack IMP-9 judges -> what runs as it: serviceAccounts, controller.serviceAccount
        and the accounts whose token a process the suite starts is given ({sa_kubeconfig:NS/NAME})."""
        found: dict[str, list[str]] = {}
        for account, label, _, _ in self._account_uses():
            found.setdefault(account, []).append(label)
        return {account: ", ".join(dict.fromkeys(r for r in roles if r)) for account, roles in found.items()}

    def account_users(self) -> dict[str, Users]:
        """Every account of accounts() -> its central and its per-node users (a serviceAccounts entry without a role
        is named "serviceAccounts"): IMP-9 and RDY-8 judge an account against the needs of each part it serves."""
        found: dict[str, Users] = {}
        for account, label, central, per_node in self._account_uses():
            users = found.setdefault(account, Users())
            for wanted, into in ((central, users.central), (per_node, users.per_node)):
                if wanted and (label or "serviceAccounts") not in into:
                    into.append(label or "serviceAccounts")
        return found

    @model_validator(mode="after")
    def _accounts_are_known(self) -> Profile:
        listed = [a.account for a in self.service_accounts]
        if len(set(listed)) != len(listed):
            raise ValueError(f"serviceAccounts: each account once: {listed}")
        accounts = self.accounts()
        for right in self.rights:
            if right.account not in accounts:
                raise ValueError(f"rights: {right.account!r} is none of the stack's accounts {sorted(accounts)}")
        return self

    def restartable(self) -> list[Role]:
        """The roles IMP-8 restarts: the declared ones, or the controller process as the one role."""
        if self.roles:
            return list(self.roles)
        return [Role(name="controller", process=self.controller.process)] if self.controller.process else []

    @field_validator("processes")
    @classmethod
    def _unique(cls, value: list[Process]) -> list[Process]:
        names = [p.name for p in value]
        if len(set(names)) != len(names):
            raise ValueError(f"process names must be unique: {names}")
        return value
