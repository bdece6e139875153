"""What the running components say about their own settings: feature gates and the scheduler's binding timeout.

The suite certifies what a cluster does, not what it was asked to do: the gates it passed (local, kind) or the
values a vendor declares (existing) are compared with what kube-apiserver and kube-scheduler report.
- Every component built with component-base serves the gauge `kubernetes_feature_enabled{name,stage}` on /metrics
  (1 on, 0 off), one series per gate it knows. kube-apiserver's /metrics is reached through the API with the run's
  credentials; kube-scheduler's on its own secure port (local: the suite knows it; existing: --scheduler-url), with
  the client certificate or token of the run's kubeconfig (delegated authentication and authorization).
- kube-scheduler's /configz (same port, same authn) serves its KubeSchedulerConfiguration as loaded, with the
  DynamicResources plugin's args: the bindingTimeout it was configured with.
Neither is the scheduler's behaviour: SCH-6 measures the timeout itself. Where an endpoint cannot be reached (the
scheduler of a managed cluster), the reading says why and nothing is assumed.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from conformance.cluster.client import Cluster

# kubernetes_feature_enabled{name="DRADeviceBindingConditions",stage="BETA"} 1
_GAUGE_RE = re.compile(r"^kubernetes_feature_enabled\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)", re.MULTILINE)
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
READ_TIMEOUT_S = 5.0
# The gates the reports show (a component knows some 300): DRA's own.
REPORTED_GATE_RE = re.compile(r"^(DRA|DynamicResource)")


@dataclass(frozen=True)
class FeatureGauge:
    name: str
    stage: str  # ALPHA, BETA, "" for GA, DEPRECATED
    enabled: bool


def parse_feature_gauges(metrics: str) -> dict[str, FeatureGauge]:
    """The `kubernetes_feature_enabled` series of a Prometheus text exposition, by gate name."""
    found: dict[str, FeatureGauge] = {}
    for match in _GAUGE_RE.finditer(metrics):
        labels = dict(_LABEL_RE.findall(match["labels"]))
        if "name" not in labels:
            continue
        found[labels["name"]] = FeatureGauge(labels["name"], labels.get("stage", ""), float(match["value"]) != 0)
    return found


def parse_duration(text: str) -> float:
    """Seconds of a Go duration string as a configuration serializes it ("20s", "1m30s", "600s")."""
    parts = _DURATION_RE.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def configz_binding_timeout(configz: dict[str, Any]) -> float | None:
    """DynamicResourcesArgs.bindingTimeout of the default-scheduler profile in kube-scheduler's /configz, or None
    when the profile does not configure the plugin's args (then the release's default applies)."""
    config = configz.get("componentconfig") or configz
    for profile in config.get("profiles") or []:
        if profile.get("schedulerName", "default-scheduler") != "default-scheduler":
            continue
        for plugin in profile.get("pluginConfig") or []:
            if plugin.get("name") == "DynamicResources":
                value = (plugin.get("args") or {}).get("bindingTimeout")
                return parse_duration(value) if value else None
    return None


@dataclass
class ComponentReading:
    """What one component reported, or why it could not be read."""

    component: str
    source: str  # where it was read: "/metrics through the API", "https://127.0.0.1:port/metrics"
    gates: dict[str, FeatureGauge] = field(default_factory=dict)
    error: str = ""  # why the gates could not be read ("" when they were)
    binding_timeout_s: float | None = None  # kube-scheduler's /configz, where served
    configz_error: str = ""

    def as_report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.error:
            out["unreadable"] = self.error
        else:
            out["featureGates"] = {n: g.enabled for n, g in sorted(self.gates.items()) if REPORTED_GATE_RE.match(n)}
        if self.component == "kube-scheduler":
            if self.binding_timeout_s is not None:
                out["configzBindingTimeoutSeconds"] = self.binding_timeout_s
            elif self.configz_error:
                out["configzUnreadable"] = self.configz_error
        return out


class ComponentClient:
    """GETs on a component's own port with the credentials of a kubeconfig's current user: its client certificate
    (inline or a file) or its bearer token. Exec plugins are not run: such a kubeconfig is said to be unusable."""

    def __init__(self, kubeconfig: Path) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        context_name = doc.get("current-context")
        context = next((c["context"] for c in doc.get("contexts") or [] if c["name"] == context_name), None)
        if context is None:
            raise ValueError(f"{kubeconfig}: no current context")
        user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
        self._dir = tempfile.TemporaryDirectory(prefix="dra-component-client-")
        self.headers: dict[str, str] = {}
        self.context = ssl.create_default_context()
        # Components serve self-signed serving certificates (kwokctl, kubeadm): only the client is verified.
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE
        cert, key = self._pem(user, "client-certificate"), self._pem(user, "client-key")
        if cert and key:
            self.context.load_cert_chain(cert, key)
        elif user.get("token"):
            self.headers["Authorization"] = f"Bearer {user['token']}"
        else:
            self.close()
            raise ValueError(
                f"{kubeconfig}: the user {context['user']!r} has neither a client certificate nor a token "
                "(an exec plugin is not run)"
            )

    def _pem(self, user: dict[str, Any], key: str) -> Path | None:
        if data := user.get(f"{key}-data"):
            path = Path(self._dir.name) / key
            path.write_bytes(base64.b64decode(data))
            return path
        return Path(user[key]) if user.get(key) else None

    def get(self, url: str) -> str:
        request = urllib.request.Request(url, headers=self.headers)
        with urllib.request.urlopen(request, timeout=READ_TIMEOUT_S, context=self.context) as response:
            return response.read().decode(errors="replace")

    def close(self) -> None:
        self._dir.cleanup()


def read_scheduler(endpoint: str, kubeconfig: Path) -> ComponentReading:
    """kube-scheduler's gates (/metrics) and bindingTimeout (/configz) on its secure port `endpoint`."""
    reading = ComponentReading("kube-scheduler", f"{endpoint}/metrics")
    try:
        client = ComponentClient(kubeconfig)
    except (ValueError, KeyError, StopIteration, OSError, ssl.SSLError) as exc:
        reading.error = f"no credentials to present: {exc}"
        return reading
    try:
        try:
            reading.gates = parse_feature_gauges(client.get(f"{endpoint}/metrics"))
            if not reading.gates:
                reading.error = "its /metrics has no kubernetes_feature_enabled series"
        except OSError as exc:
            reading.error = f"GET {endpoint}/metrics: {exc}"
        try:
            reading.binding_timeout_s = configz_binding_timeout(json.loads(client.get(f"{endpoint}/configz")))
            if reading.binding_timeout_s is None:
                reading.configz_error = "/configz configures no DynamicResources args (the release default applies)"
        except (OSError, ValueError) as exc:
            reading.configz_error = f"GET {endpoint}/configz: {exc}"
    finally:
        client.close()
    return reading


def read_apiserver(cluster: Cluster) -> ComponentReading:
    """kube-apiserver's gates from its /metrics, read through the API with the run's credentials (an existing
    cluster's admin kubeconfig may read it; a narrower one gets 403, said as such)."""
    reading = ComponentReading("kube-apiserver", "/metrics through the API")
    try:
        reading.gates = parse_feature_gauges(cluster.raw_get("/metrics"))
    except Exception as exc:  # ApiException (403), connection errors: the reading says why, the check skips
        reading.error = f"GET /metrics: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
        return reading
    if not reading.gates:
        reading.error = "its /metrics has no kubernetes_feature_enabled series"
    return reading
