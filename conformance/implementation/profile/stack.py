"""How the suite runs and reaches the stack: its processes and their readiness, hooks, the roles IMP-8 restarts,
the controller, and the endpoints of its fabric probe, fault injector and readiness probe."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from conformance.implementation.profile.accounts import ACCOUNT_PATTERN
from conformance.implementation.profile.base import _Strict
from conformance.implementation.profile.placeholders import placeholder_args, uses_placeholder

_PROCESS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


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
    port: str | None = Field(
        None,
        description="the named port ({port:NAME}) ready.http asks; default: the process's {port} or port file",
    )

    @model_validator(mode="after")
    def _one(self) -> Readiness:
        if (self.http is None) == (self.log is None):
            raise ValueError("give exactly one of 'http' (a path, needs a port) or 'log' (a regular expression)")
        if self.log is not None:
            re.compile(self.log)
        if self.ca_file is not None and self.http is None:
            raise ValueError("caFile is for ready.http over HTTPS")
        if self.port is not None and self.http is None:
            raise ValueError("port is for ready.http (the named port it asks)")
        return self


class Process(_Strict):
    """One process of the implementation, started in profile order and stopped in reverse order. Placeholders in
    command and env: PLACEHOLDERS (placeholder_problem says where each may stand).

    perNode: one instance per node of the cluster (nodes that join during the run included), started when its node
    appears, stopped when it goes; {node} names it, {port} is per instance, logs are NAME@NODE.log.

    Several ports (a chart's health and metrics ports): {port:NAME} for each, reached with {url:PROCESS:NAME};
    ready.port names the one ready.http asks."""

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
        """The process has its own port ({port} or portFile), the one {url:NAME} reaches."""
        return self.port_file or self.fixed_port

    @property
    def named_ports(self) -> list[str]:
        """The names of its further ports ({port:NAME} in its command or env), each reached with {url:NAME:PORT}."""
        return placeholder_args([*self.command, *self.env.values()], "port")

    @model_validator(mode="after")
    def _http_needs_port(self) -> Process:
        ready_port = self.ready.port if self.ready else None
        if ready_port is not None and ready_port not in self.named_ports:
            raise ValueError(f"ready.port {ready_port!r} is none of the process's {{port:NAME}} {self.named_ports}")
        if self.ready and self.ready.http and not (self.has_port or ready_port):
            raise ValueError(
                "ready.http needs a port: {port} in the command (or portFile: true), or ready.port naming a {port:NAME}"
            )
        if self.tls and not (self.has_port or self.named_ports):
            raise ValueError("tls: true needs a port: {port} or {port:NAME} in the command (or portFile: true)")
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
