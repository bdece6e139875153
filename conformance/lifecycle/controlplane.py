"""A lifecycle run's own local cluster, whose kube-apiserver, kube-scheduler and kube-controller-manager are restarted
in place (cluster/providers/local/restart.py) with DRADeviceBindingConditions switched, or on another release's
binaries, always on the same etcd. It knows what each component runs now, for every step's record."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from conformance.cluster.gates import binary_gates, format_gates, gates_to_enable, parse_gate_overrides
from conformance.cluster.providers.base import ClusterInfo, ClusterSpec, default_nodes
from conformance.cluster.providers.local import LocalProvider
from conformance.cluster.providers.local.restart import CommandLine
from conformance.cluster.toolchain.build import Binaries, ensure_binaries, is_cached
from conformance.cluster.versions import KubeVersion

GATE = "DRADeviceBindingConditions"
APISERVER, SCHEDULER, MANAGER = "kube-apiserver", "kube-scheduler", "kube-controller-manager"
# A pod may wait in PreBind for the whole run (a waiting pod is carried across every switch): far above its length.
BINDING_TIMEOUT_S = 3600
NODES = 2
# kube-scheduler's log, kept with the reports, says why a pod got no decision after a restart (V(4): each attempt and
# why a pod waits); a run is a few minutes, its log a few MB at most.
SCHEDULER_VERBOSITY = 4


class NotCached(RuntimeError):
    """A release the run needs has no binaries in the cache (a lifecycle run never builds: it would take most of an
    hour on a loaded machine)."""


@functools.cache
def _known_gates(binary: str) -> dict[str, bool]:
    return gates_to_enable(binary_gates(Path(binary)))


def binaries_of(version: KubeVersion) -> Binaries:
    if not is_cached(version):
        raise NotCached(
            f"no binaries of Kubernetes {version} in the cache: `dra-conformance build --k8s-version {version}` "
            "builds them (30-50 min on a loaded machine)"
        )
    return ensure_binaries(version)


@dataclass
class ControlPlane:
    version: KubeVersion  # the release the cluster started on
    say: Callable[[str], None]
    provider: LocalProvider = field(init=False)
    info: ClusterInfo = field(init=False)
    release: dict[str, KubeVersion] = field(default_factory=dict)  # component -> what it runs now
    gate: dict[str, bool] = field(default_factory=dict)  # component -> DRADeviceBindingConditions now

    def start(self) -> ClusterInfo:
        binaries_of(self.version)
        self.provider = LocalProvider(progress=self.say)
        spec = ClusterSpec(
            version=self.version,
            nodes=default_nodes(NODES, 1),
            binding_timeout_s=BINDING_TIMEOUT_S,
            scheduler_verbosity=SCHEDULER_VERBOSITY,
            watch_components=False,  # its restarts are the procedure; a component that does not come back stops it
        )
        self.info = self.provider.start(spec)
        for component in (APISERVER, SCHEDULER, MANAGER):
            self.release[component] = self.version
            self.gate[component] = self.info.feature_gates.get(GATE, True)
        return self.info

    def stop(self) -> None:
        if getattr(self, "provider", None) is not None:
            self.provider.stop()

    @property
    def workdir(self) -> Path | None:
        """The cluster's folder (its components log under it); None before a start."""
        provider = getattr(self, "provider", None)
        return provider.workdir if provider is not None else None

    def describe(self) -> dict[str, str]:
        """What every component runs now, e.g. {"kube-apiserver": "1.37.2, gate on"}."""
        return {
            c: f"{self.release[c]}, gate {'on' if self.gate[c] else 'off'}" for c in (APISERVER, SCHEDULER, MANAGER)
        }

    # -- switches ----------------------------------------------------------------------------------------------
    def set_gate(self, component: str, on: bool) -> CommandLine:
        """Restart `component` with DRADeviceBindingConditions `on` (its other gates as they are)."""
        if (why := self.release[component].release.gate_off_reason(GATE)) and not on:
            raise ValueError(why)

        def edit(line: CommandLine) -> CommandLine:
            gates = parse_gate_overrides(line.flag("feature-gates") or "")
            gates[GATE] = on
            line = line.with_flag("feature-gates", format_gates(gates))
            return _scheduler_config(line, on) if component == SCHEDULER else line

        self.say(f"restarting {component} with {GATE}={str(on).lower()}")
        line = self.provider.restart_component(self.info, component, edit, f"{GATE}={str(on).lower()}")
        self.gate[component] = on
        return line

    def set_release(self, component: str, version: KubeVersion) -> CommandLine:
        """Restart `component` on `version`'s binary, with the gates that binary knows of the suite's (the binding
        conditions gate as it is now) and, for kube-apiserver, that release's --runtime-config."""
        binaries = binaries_of(version)
        binary = binaries.kube[component]
        gate_on = self.gate[component]

        def edit(line: CommandLine) -> CommandLine:
            gates = dict(_known_gates(str(binary)))
            if GATE in gates:
                gates[GATE] = gate_on
            line = line.with_binary(binary).with_flag("feature-gates", format_gates(gates) or None)
            if component == APISERVER:
                line = line.with_flag("runtime-config", _runtime_config(line.flag("runtime-config"), version))
            return line

        self.say(f"restarting {component} on Kubernetes {version} (was {self.release[component]})")
        line = self.provider.restart_component(self.info, component, edit, f"Kubernetes {version}")
        self.release[component] = version
        return line


def _runtime_config(current: str | None, version: KubeVersion) -> str | None:
    """kube-apiserver's --runtime-config on `version`: what it was (an administrator's setting survives an upgrade or a
    downgrade: e.g. resource.k8s.io/v1beta2/devicetaintrules, which a 1.36 kube-scheduler with DRADeviceTaintRules
    lists, and a 1.37 kube-apiserver serves only when asked) plus what `version` needs of its own."""
    entries = [e for e in (current or "").split(",") if e]
    entries += [e for e in version.release.runtime_config.split(",") if e and e not in entries]
    return ",".join(entries) or None


def _scheduler_config(line: CommandLine, on: bool) -> CommandLine:
    """kube-scheduler's --config for the gate: `bindingTimeout` is a configuration error with the gate off, so the
    gate-off run reads a copy without it (beside the original, which the gate-on run reads again)."""
    current = line.flag("config")
    if current is None:
        return line
    original = current.removesuffix(".gate-off.yaml")
    if on:
        return line.with_flag("config", original)
    config = yaml.safe_load(Path(original).read_text())
    for profile in config.get("profiles") or []:
        plugins = [p for p in profile.get("pluginConfig") or [] if p.get("name") != "DynamicResources"]
        if plugins:
            profile["pluginConfig"] = plugins
        else:
            profile.pop("pluginConfig", None)
    off = f"{original}.gate-off.yaml"
    Path(off).write_text(yaml.safe_dump(config))
    return line.with_flag("config", off)
