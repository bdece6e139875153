"""Implementation profiles: the contract between the suite and an implementation under test.

A profile says how to start the implementation (processes), what DRA driver its devices use, how the suite
reaches its optional fabric probe and fault injector, and which capabilities it claims. Unknown keys are errors
(a typo must not silently disable a scenario), and a bad profile fails with one message naming the field,
before any cluster work. The scenario catalogue (issue 5) adds capabilities and timeouts to this schema.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from conformance.cluster.versions import PREBIND_POLL_S
from conformance.implementation.names import qualified_name_problems

_PROCESS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# {key} or {key:arg} in commands, env, manifests and endpoint URLs (see Process for the keys)
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([A-Za-z0-9_./@-]+))?\}")
# The placeholders without an argument whose value is the same for the whole run.
PLAIN_PLACEHOLDERS = frozenset({"kubeconfig", "workdir", "bin", "profile_dir", "ca_file"})
# {KEY:NAME} of a process with a port: the forms of its address
ADDRESS_PLACEHOLDERS = frozenset({"url", "https_url", "hostport"})
NODE = "{node}"  # in a per-node process or a node hook: the node it runs for (filled before the others)
# Every placeholder, in the form a profile writes it, and what it stands for: the profile reference (docs/) is
# generated from this, and placeholder_problem refuses a key that is not here, so a new one cannot go undocumented.
PLACEHOLDERS: dict[str, str] = {
    "{kubeconfig}": "the run's admin kubeconfig (a file)",
    "{workdir}": "the run's working folder for the implementation",
    "{bin}": "the folder of the running Python's console scripts (the reference's commands are there)",
    "{profile_dir}": "the folder of the profile file",
    "{port}": "a free port the harness picks once per run for this process: the same after a restart, so the "
    "{url:NAME} others hold stays right (a process's command or env only; per instance for a perNode process)",
    "{port_file}": "this process's port file: with portFile: true it writes the port it bound there (a restart may "
    "change it)",
    "{url:NAME}": "http://127.0.0.1:PORT of an earlier process NAME with {port} or portFile",
    "{https_url:NAME}": "https://127.0.0.1:PORT of the same (an endpoint there trusts the run CA when NAME has tls)",
    "{hostport:NAME}": "127.0.0.1:PORT of the same",
    "{tls_cert:NAME}": "the serving certificate (127.0.0.1, localhost) the harness made for process NAME (tls: true)",
    "{tls_key:NAME}": "its key (0600)",
    "{ca_file}": "the CA of the run that signed those certificates",
    "{sa_kubeconfig:NAMESPACE/NAME}": "a kubeconfig with a bound token of that ServiceAccount (e.g. one the "
    "profile's manifests create): the process runs with its own RBAC, never as cluster admin",
    "{pod_kubeconfig:NAMESPACE/NAME@NODE}": "the same, the token bound to a pod the harness places on NODE: the API "
    "server reports the node (authentication.kubernetes.io/node-name) to admission policies; per node, @NODE may be "
    "left out",
    "{node}": "in a perNode process or a node hook: the node's name (filled first: {pod_kubeconfig:ns/sa@{node}})",
    "{env:NAME}": "a variable of the suite's environment; unset is an error",
}
_PLACEHOLDER_KEYS = frozenset(PLACEHOLDER.fullmatch(form)[1] for form in PLACEHOLDERS)  # type: ignore[index]


def uses_placeholder(texts: list[str], key: str) -> bool:
    return any(m[1] == key and m[2] is None for text in texts for m in PLACEHOLDER.finditer(text))


@dataclass(frozen=True)
class Scope:
    """Where a profile string stands, for placeholder_problem. `process`: the process whose command or env holds it
    (None: a manifest, hook, endpoint or restart command); `ported`: the processes with a port that start before this
    string is used (None: not known here; the harness checks that when it fills the address); `tls`: the processes
    with tls: true (None: not known); `per_node`: a per-node process or a node hook ({node} is known);
    `per_node_processes`: the processes with perNode: true (their address exists only per node)."""

    process: Process | None = None
    ported: frozenset[str] | None = None
    tls: frozenset[str] | None = None
    per_node: bool = False
    per_node_processes: frozenset[str] = frozenset()


def placeholder_problem(key: str, arg: str | None, scope: Scope) -> str | None:
    """Why {key} / {key:arg} cannot be used where it stands, or None: the one definition of the placeholders, used
    by the harness (filling them) and by `profile check` (before a run)."""
    if key not in _PLACEHOLDER_KEYS:
        return "unknown placeholder (each one is described in PLACEHOLDERS, conformance/implementation/profile.py)"
    process = scope.process
    if key in PLAIN_PLACEHOLDERS:
        return None if arg is None else f"{{{key}}} takes no argument"
    if key == "node":
        if arg is not None:
            return "{node} takes no argument"
        return None if scope.per_node else "{node} only in a perNode process or a node hook"
    if key in ("port_file", "port"):
        if arg is not None:
            return f"{{{key}}} takes no argument"
        if process is None:
            return f"{{{key}}} only in a process's command or env (it is that process's own)"
        if key == "port_file" and not process.port_file:
            return "{port_file} only in a process with portFile: true"
        return None
    if key in ADDRESS_PLACEHOLDERS and arg:
        ported = scope.ported
        if ported is not None and arg not in ported:
            return f"{{{key}:{arg}}} needs an earlier process {arg!r} with a port ({{port}} or portFile: true)"
        if arg in scope.per_node_processes and not scope.per_node:
            return f"{{{key}:{arg}}}: {arg!r} runs per node; only a perNode process or node hook reaches it"
        return None
    if key in ("tls_cert", "tls_key") and arg:
        if scope.tls is not None and arg not in scope.tls:
            return f"{{{key}:{arg}}} needs a process {arg!r} with tls: true"
        return None
    if key == "sa_kubeconfig" and arg:
        return None if _SA.fullmatch(arg) else "{sa_kubeconfig:NAMESPACE/SERVICEACCOUNT}"
    if key == "pod_kubeconfig" and arg:
        if _POD_BOUND.fullmatch(arg):
            return None
        if _SA.fullmatch(arg):
            return None if scope.per_node else f"{{pod_kubeconfig:{arg}}} names no node: add @NODE (or use it per node)"
        return "{pod_kubeconfig:NAMESPACE/SERVICEACCOUNT@NODE} (@NODE may be left out per node)"
    if key == "env" and arg:
        return None  # whether it is set is known only where it is filled
    return "unknown placeholder"


_SA = re.compile(r"[^/@]+/[^/@]+")  # NAMESPACE/NAME (the API server judges the names themselves)
_POD_BOUND = re.compile(r"[^/@]+/[^/@]+@[^/@]+")


class ProfileError(ValueError):
    """The profile cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Readiness(_Strict):
    """How the harness knows a process is ready: an HTTP path answering 2xx, or a line in its output. caFile: the
    process serves HTTPS with a certificate of this CA (the profile's own; a process with tls: true uses the run's)."""

    http: str | None = Field(None, description="a path on the process's port that answers 2xx once it is ready")
    log: str | None = Field(None, description="a regular expression matched against each line of its output")
    ca_file: Annotated[
        str | None,
        Field(
            alias="caFile",
            description="the process serves HTTPS with a certificate of this CA (yours): ready.http "
            "is asked over HTTPS",
        ),
    ] = None
    timeout_s: Annotated[
        float, Field(alias="timeoutSeconds", gt=0, le=600, description="not ready within this: the run stops")
    ] = 30.0

    @model_validator(mode="after")
    def _one(self) -> Readiness:
        if (self.http is None) == (self.log is None):
            raise ValueError("give exactly one of 'http' (a path, needs a port) or 'log' (a regular expression)")
        if self.log is not None:
            re.compile(self.log)
        if self.ca_file is not None and self.http is None:
            raise ValueError("caFile is for ready.http over HTTPS")
        return self


class Process(_Strict):
    """One process of the implementation, started in profile order and stopped in reverse order. Placeholders in
    command and env: PLACEHOLDERS (placeholder_problem says where each may stand).

    perNode: one instance per node of the cluster (nodes that join during the run included), started when its node
    appears, stopped when it goes; {node} names it, {port} is per instance, logs are NAME@NODE.log."""

    name: str = Field(description="unique, lowercase alphanumerics and '-'; {url:NAME} and roles refer to it")
    command: list[str] = Field(min_length=1, description="the command and its arguments (placeholders allowed)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables (placeholders allowed)")
    port_file: Annotated[
        bool, Field(alias="portFile", description="the process writes the port it bound to {port_file}")
    ] = False
    ready: Readiness | None = Field(None, description="how the harness knows it is ready; none: once started")
    kubeconfig: str = Field(
        "{kubeconfig}", description="the kubeconfig it gets as $KUBECONFIG, e.g. {sa_kubeconfig:NAMESPACE/NAME}"
    )
    home: bool = Field(
        False, description="a private $HOME whose .kube/config is that kubeconfig, for processes that read only it"
    )
    per_node: Annotated[
        bool,
        Field(alias="perNode", description="one instance per node, nodes that join during the run included ({node})"),
    ] = False
    tls: bool = Field(
        False, description="serve HTTPS with a certificate of the run CA ({tls_cert:NAME}, {tls_key:NAME}, {ca_file})"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _PROCESS_NAME.match(value):
            raise ValueError(f"process name {value!r} must be lowercase alphanumerics and '-'")
        return value

    @property
    def fixed_port(self) -> bool:
        """The harness picks this process's port ({port} in its command or env), once per run."""
        return uses_placeholder([*self.command, *self.env.values()], "port")

    @property
    def has_port(self) -> bool:
        return self.port_file or self.fixed_port

    @model_validator(mode="after")
    def _http_needs_port(self) -> Process:
        if self.ready and self.ready.http and not self.has_port:
            raise ValueError("ready.http needs a port: {port} in the command (or portFile: true)")
        if self.tls and not self.has_port:
            raise ValueError("tls: true needs a port: {port} in the command (or portFile: true)")
        if self.tls and self.ready and self.ready.ca_file:
            raise ValueError("tls: true serves a certificate of the run CA; ready.caFile is for a certificate of yours")
        return self


class Endpoint(_Strict):
    """An HTTP(S) endpoint of the implementation, e.g. {url:fabric-manager}/v1/attachments,
    https://fabric.example.com:8443/v1/attachments with its own CA and a bearer token ({env:NAME} keeps the
    token out of the file), or {env:FABRIC_MANAGER_URL}/v1/attachments for an implementation the suite does not
    start (the variable must hold an http:// or https:// URL)."""

    url: str = Field(description="http://, https://, {url:PROCESS} or {env:NAME} holding an http(s) URL")
    ca_file: Annotated[
        str | None, Field(alias="caFile", description="a CA bundle for an https:// URL signed by its own CA")
    ] = None
    token: str | None = Field(None, description="sent as a bearer token; {env:NAME} keeps it out of the file")

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str) -> str:
        if not value.startswith(("http://", "https://", "{url:", "{https_url:", "{env:")):
            raise ValueError(
                f"url {value!r} must start with http://, https://, {{url:PROCESS}}, {{https_url:PROCESS}} "
                "or {env:NAME}"
            )
        return value


class Hook(_Strict):
    """A one-shot command (same placeholders as a process) run to completion; its output goes to the run's logs."""

    name: str = Field(description="names its log, setup-NAME.log")
    command: list[str] = Field(min_length=1, description="the command and its arguments (placeholders allowed)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables (placeholders allowed)")
    timeout_s: Annotated[
        float, Field(alias="timeoutSeconds", gt=0, le=3600, description="not finished within this: it failed")
    ] = 300.0


class Hooks(_Strict):
    """setup: after the cluster is up and the manifests are applied, before the processes start (e.g. node fields
    the stack needs); node: for every node, {node} its name — the nodes there at the start (after setup, before the
    processes) and every node that joins during the run (before that node's perNode processes start); teardown:
    after the processes stopped, before the manifests are deleted."""

    setup: list[Hook] = Field(
        default_factory=list, description="run after the manifests, before the processes; a failure stops the run"
    )
    node: list[Hook] = Field(
        default_factory=list,
        description="run for every node ({node}): those there at the start and every node that joins during the run",
    )
    teardown: list[Hook] = Field(
        default_factory=list, description="run after the processes stopped, before the manifests are deleted"
    )


class Role(_Strict):
    """A part of the stack the suite may restart mid-attach (IMP-8 restarts each role in turn): a process the
    suite started (killed with SIGKILL and started again) or, for an implementation running in the cluster, a
    restart command (e.g. kubectl delete pod -l app=attacher) run to completion."""

    name: str = Field(description="unique, e.g. pool-publisher, attacher, condition-writer")
    process: str | None = Field(None, description="a process of `processes`: killed with SIGKILL and started again")
    command: list[str] | None = Field(
        None, description="a restart command that returns once the role is back (an implementation in the cluster)"
    )
    timeout_s: Annotated[
        float, Field(alias="timeoutSeconds", gt=0, le=600, description="the restart must be done within this")
    ] = 120.0

    @model_validator(mode="after")
    def _one(self) -> Role:
        if (self.process is None) == (self.command is None):
            raise ValueError("give exactly one of 'process' (one of processes) or 'command' (a restart command)")
        return self


ACCOUNT_PATTERN = r"^[a-z0-9-]+/[a-z0-9.-]+$"  # NAMESPACE/NAME of a ServiceAccount
# {sa_kubeconfig:NS/NAME}, {pod_kubeconfig:NS/NAME} or {pod_kubeconfig:NS/NAME@NODE} (NODE may be {node}): the
# account a process runs as
_SA_PLACEHOLDER = re.compile(r"\{(?:sa|pod)_kubeconfig:([a-z0-9-]+/[a-z0-9.-]+)(?:@[^}]*\}?)?\}")


class Controller(_Strict):
    """The composable controller, for the scenarios that restart it (IMP-8) or check its privileges (IMP-9)."""

    process: str | None = Field(default=None, description="the process (of `processes`) the suite may kill and restart")
    service_account: Annotated[
        str | None,
        Field(
            alias="serviceAccount",
            pattern=ACCOUNT_PATTERN,
            description="NAMESPACE/NAME the controller runs as: IMP-9 checks what it may do",
        ),
    ] = None


class ServiceAccount(_Strict):
    """A ServiceAccount a part of the stack runs as (IMP-9 judges every one): e.g. each controller of a split stack
    deployed in the cluster. Processes the suite starts with {sa_kubeconfig:NS/NAME} are judged without being
    listed here."""

    account: Annotated[str, Field(pattern=ACCOUNT_PATTERN, description="NAMESPACE/NAME of the ServiceAccount")]
    role: str | None = Field(None, description="what runs as it (e.g. pool-publisher), shown in the report")


class Right(_Strict):
    """A right an account holds beyond the minimum IMP-9 allows (conformance/suite/implementation/rights.py),
    declared with the reason the stack needs it; the report prints it. `group` "" is the core group; `resource` may
    name a subresource (pods/eviction). Declaring resource.k8s.io resourceslices writes declares writing other
    drivers' slices (what RBAC alone grants a pool publisher: it cannot restrict slices by driver)."""

    account: Annotated[
        str, Field(pattern=ACCOUNT_PATTERN, description="NAMESPACE/NAME of the ServiceAccount that holds it")
    ]
    verbs: list[str] = Field(min_length=1, description="the verbs it may use (get, create, patch, ...)")
    group: str = Field("", description='the API group; "" is the core group')
    resource: Annotated[
        str,
        Field(
            pattern=r"^(\*|[a-z0-9.-]+(/[a-z0-9.-]+)?)$",
            description="the resource, or resource/subresource (pods/eviction)",
        ),
    ]
    namespace: str | None = Field(None, description="only in this namespace; none: wherever the account holds it")
    reason: Annotated[str, Field(min_length=10, description="why the stack needs it: IMP-9 prints it with its result")]

    def text(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.account}: {', '.join(self.verbs)} {self.group or 'core'}/{self.resource}{where} ({self.reason})"


class Promises(_Strict):
    """Times the implementation promises; scenarios wait this long (plus the scheduler's poll) and no longer."""

    attach_s: Annotated[
        float,
        Field(
            alias="attachSeconds",
            gt=0,
            le=3600,
            description="an attach (for bindingModel node-local: readying the allocated device) completes within "
            "this; also sets the bindingTimeout of a cluster the suite starts",
        ),
    ] = 30.0
    detach_s: Annotated[
        float,
        Field(
            alias="detachSeconds",
            gt=0,
            le=3600,
            description="a released device is detached and offered again within this",
        ),
    ] = 60.0
    publish_s: Annotated[
        float,
        Field(
            alias="publishSeconds",
            gt=0,
            le=3600,
            description="within this many seconds of the implementation's readiness it has published what it owes: "
            "the `published` counts, every fabric pool reaching a Ready schedulable node, and a node without "
            "node-local devices reached by a fabric pool. The device read and every scenario that cannot start "
            "without it wait this long, then FAIL with the cause (pool, node selector, which label each node lacks)",
        ),
    ] = 60.0


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


# The profile schema's version. A profile names it so that a later incompatible schema is refused with a clear
# message instead of being misread; the JSON Schema of this version is profile.schema.json (next to this module).
API_VERSION = "dra-conformance.example.com/v1alpha1"
KIND = "ImplementationProfile"
# bindingTimeout of the clusters the suite starts without an implementation profile (--profile none), and the least
# any profile gets (Profile.binding_timeout_s); --binding-timeout overrides both.
DEFAULT_BINDING_TIMEOUT_S = 20
SCHEMA_FILE = Path(__file__).with_name("profile.schema.json")
READ_SLACK_S = 60.0  # the device read's default wait past promises.publishSeconds for pools to be complete and rest
TEMPLATE_FILE = Path(__file__).with_name("profile-template.yaml")  # `dra-conformance profile init`
FULL_TEMPLATE_FILE = Path(__file__).with_name("profile-template-full.yaml")  # `profile init --full`: every field


class Published(_Strict):
    """Readiness on what matters: the state the implementation's slices reach once it has published (besides its
    processes' readiness). The run's device read waits for it up to promises.publishSeconds (what the implementation
    owes); past that the run goes on with what is published, and the scenarios that need what is missing fail with
    the cause."""

    fabric_devices: Annotated[
        int,
        Field(
            alias="fabricDevices",
            ge=0,
            description="fabric devices (or counted entries) published in total; for bindingModel node-local the "
            "node-local devices with binding conditions",
        ),
    ] = 1
    per_model: Annotated[
        dict[str, int], Field(alias="perModel", description="entries per value of modelAttribute (counted entries)")
    ] = Field(default_factory=dict)
    settle_s: Annotated[
        float, Field(alias="settleSeconds", gt=0, le=600, description="the slices unchanged this long: published")
    ] = 2.0
    timeout_s: Annotated[
        float | None,
        Field(
            alias="timeoutSeconds",
            gt=0,
            le=3600,
            description="the longest the device read waits in all, counted like promises.publishSeconds and at least "
            "as long: past the promise it waits only for the slices to be complete and unchanged for settleSeconds, "
            "then reads them as they are (default: publishSeconds + 60)",
        ),
    ] = None

    @property
    def declared(self) -> bool:
        return "fabric_devices" in self.model_fields_set or bool(self.per_model)


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

    def accounts(self) -> dict[str, str]:
        """Every ServiceAccount of the stack IMP-9 judges -> what runs as it: serviceAccounts, controller.serviceAccount
        and the accounts whose token a process the suite starts is given ({sa_kubeconfig:NS/NAME})."""
        found: dict[str, list[str]] = {}
        for entry in self.service_accounts:
            found.setdefault(entry.account, []).append(entry.role or "")
        if self.controller.service_account:
            found.setdefault(self.controller.service_account, []).append("controller")
        for process in self.processes:
            for text in [process.kubeconfig, *process.command, *process.env.values()]:
                for account in _SA_PLACEHOLDER.findall(text):
                    found.setdefault(account, []).append(f"process {process.name}")
        return {account: ", ".join(dict.fromkeys(r for r in roles if r)) for account, roles in found.items()}

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


class LoadedProfile(BaseModel):
    """A validated profile and where it came from (placeholders resolve relative to its folder)."""

    model_config = ConfigDict(frozen=True)
    path: Path
    profile: Profile


def load_profile(path: str | Path) -> LoadedProfile:
    path = Path(path)
    try:
        raw: Any = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ProfileError(f"profile {path}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile {path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"profile {path}: expected a mapping at the top")
    if "apiVersion" not in raw or "kind" not in raw:
        raise ProfileError(
            f"profile {path}: apiVersion/kind missing: profiles are versioned; start it with "
            f"'apiVersion: {API_VERSION}' and 'kind: {KIND}' (schema: {SCHEMA_FILE.name}; "
            "`dra-conformance profile init` writes a commented starting profile)"
        )
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '<top>'}: {err['msg']}" for err in exc.errors())
        raise ProfileError(f"profile {path}: {problems}") from None
    return LoadedProfile(path=path.resolve(), profile=profile)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of this profile version (published as profile.schema.json; editors and CI can use it)."""
    schema = Profile.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://{API_VERSION.split('/')[0]}/schemas/{API_VERSION.split('/')[1]}/{KIND}.json",
        **schema,
        "title": f"{KIND} ({API_VERSION})",
    }
