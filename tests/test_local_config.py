"""The configuration the local provider hands to kwokctl and kube-scheduler (no cluster needed)."""

from pathlib import Path

import pytest
import yaml

from conformance.cluster.providers.base import ClusterSpec
from conformance.cluster.providers.local import (
    COMPONENTS,
    GOGC,
    PORT_OPTIONS,
    LocalProvider,
    phase_summary,
    scheduler_config,
)
from conformance.cluster.readiness import inline_kubeconfig
from conformance.cluster.toolchain.build import Binaries
from conformance.cluster.versions import parse_version


def test_scheduler_config_sets_binding_timeout_in_dynamic_resources_args() -> None:
    cfg = scheduler_config(7)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    (plugin,) = cfg["profiles"][0]["pluginConfig"]
    assert plugin["name"] == "DynamicResources"
    assert plugin["args"]["kind"] == "DynamicResourcesArgs"
    assert plugin["args"]["bindingTimeout"] == "7s"


def test_scheduler_config_without_timeout_for_1_34() -> None:
    assert "pluginConfig" not in scheduler_config(None)["profiles"][0]


def _binaries(tmp: Path) -> Binaries:
    kube = {n: tmp / n for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")}
    return Binaries(
        kube=kube,
        etcd=tmp / "etcd",
        kwok=tmp / "kwok",
        kwokctl=tmp / "kwokctl",
        etcd_version="v3.7.0",
        kwok_version="v0.8.0",
    )


def test_kwokctl_config_uses_cached_binaries_on_loopback(tmp_path: Path) -> None:
    provider = LocalProvider()
    provider.workdir = tmp_path
    spec = ClusterSpec(version=parse_version("1.36"))
    options = provider._kwokctl_config(_binaries(tmp_path), {"DRADeviceBindingConditions": True}, spec)["options"]
    assert options["bindAddress"] == "127.0.0.1"
    assert options["kubeApiserverBinary"] == str(tmp_path / "kube-apiserver")
    assert options["etcdBinary"] == str(tmp_path / "etcd")
    assert options["kubeFeatureGates"] == "DRADeviceBindingConditions=true"
    assert options["kubeRuntimeConfig"] == "resource.k8s.io/v1beta2/devicetaintrules=true"
    assert options["kubeAuthorization"] is True


def test_download_mode_leaves_binaries_to_kwokctl(tmp_path: Path) -> None:
    provider = LocalProvider(download=True)
    provider.workdir = tmp_path
    options = provider._kwokctl_config(_binaries(tmp_path), {}, ClusterSpec())["options"]
    assert "kubeApiserverBinary" not in options and options["kubeVersion"] == "v1.37.2"


def test_each_cluster_gets_distinct_kernel_chosen_ports(tmp_path: Path) -> None:
    provider = LocalProvider()
    provider.workdir = tmp_path
    first = provider._kwokctl_config(_binaries(tmp_path), {}, ClusterSpec())["options"]
    second = provider._kwokctl_config(_binaries(tmp_path), {}, ClusterSpec())["options"]
    ports = [first[k] for k in PORT_OPTIONS]
    assert len(set(ports)) == len(PORT_OPTIONS) and all(1024 < p < 65536 for p in ports)
    assert ports != [second[k] for k in PORT_OPTIONS]


def _extra_args(tmp_path: Path) -> dict[str, list[dict]]:
    """Each component's extra flags in the kwokctl configuration the local provider writes."""
    provider = LocalProvider()
    provider.workdir = tmp_path
    patches = provider._kwokctl_config(_binaries(tmp_path), {}, ClusterSpec())["componentsPatches"]
    return {p["name"]: p["extraArgs"] for p in patches}


def test_single_instance_components_run_without_leader_election(tmp_path: Path) -> None:
    """One scheduler and one controller manager: a lease to win would only delay the start."""
    assert scheduler_config(7, local=True)["leaderElection"] == {"leaderElect": False}
    assert "leaderElection" not in scheduler_config(7)  # kind keeps kubeadm's default
    patches = _extra_args(tmp_path)
    assert {"key": "leader-elect", "value": "false"} in patches["kube-controller-manager"]


def test_scheduler_and_controller_manager_clients_are_not_held_to_their_default_rate(tmp_path: Path) -> None:
    """At 50/s (scheduler) and 20/s (controller manager) the clients, not binding conditions, set SCALE-1's pace."""
    assert scheduler_config(7, local=True)["clientConnection"] == {"qps": 500, "burst": 1000}
    assert scheduler_config(7)["clientConnection"] == {"qps": 500, "burst": 1000}  # kind's too
    kind = scheduler_config(7, kubeconfig="/etc/kubernetes/scheduler.conf")["clientConnection"]
    assert kind == {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 500, "burst": 1000}
    patches = _extra_args(tmp_path)
    rates = [a for a in patches["kube-controller-manager"] if a["key"].startswith("kube-api-")]
    assert rates == [{"key": "kube-api-qps", "value": "500"}, {"key": "kube-api-burst", "value": "1000"}]


def test_every_component_gets_the_gc_target_and_keeps_its_flags(tmp_path: Path) -> None:
    """GOGC for each of kwokctl's component names (a patch naming no component is ignored by kwokctl)."""
    provider = LocalProvider()
    provider.workdir = tmp_path
    patches = provider._kwokctl_config(_binaries(tmp_path), {}, ClusterSpec())["componentsPatches"]
    assert sorted(p["name"] for p in patches) == sorted(COMPONENTS)
    assert all(p["extraEnvs"] == [{"name": "GOGC", "value": GOGC}] for p in patches)
    by_name = {p["name"]: p["extraArgs"] for p in patches}
    assert by_name["etcd"] == [{"key": "unsafe-no-fsync", "value": "true"}]
    assert by_name["kube-apiserver"] == []


def test_kubeconfig_is_made_self_contained(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "admin.key").write_bytes(b"KEY")
    source = tmp_path / "kubeconfig.yaml"
    source.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://x", "certificate-authority": str(tmp_path / "ca.crt")}}
                ],
                "users": [{"name": "u", "user": {"client-key": str(tmp_path / "admin.key")}}],
            }
        )
    )
    doc = yaml.safe_load(inline_kubeconfig(source))
    assert doc["clusters"][0]["cluster"] == {"server": "https://x", "certificate-authority-data": "Q0E="}
    assert doc["users"][0]["user"] == {"client-key-data": "S0VZ"}


def test_phases_are_printed_in_the_order_they_ended() -> None:
    timings = {"bring_up_s": 3.0, "nodes_ready_s": 2.9, "apiserver_ready_s": 2.0, "teardown_s": 0.1}
    assert phase_summary(timings) == "apiserver 2.00, nodes 2.90"


def test_selftest_knobs_make_the_scheduler_run_other_settings_than_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.cluster.providers import local

    assert local._selftest_scheduler_timeout(20, {}) == 20
    assert all(not p["extraArgs"] for p in local.component_patches() if p["name"] == "kube-scheduler")
    monkeypatch.setenv(local.SELFTEST_SCHEDULER_TIMEOUT_ENV, "35")
    assert local._selftest_scheduler_timeout(20, {}) == 35
    assert local._selftest_scheduler_timeout(None, {}) is None  # a release with a fixed timeout stays so
    monkeypatch.setenv(local.SELFTEST_SCHEDULER_GATES_ENV, "DRADeviceBindingConditions=false")
    gates = local._selftest_scheduler_gates()
    assert local._selftest_scheduler_timeout(20, gates) is None  # bindingTimeout with the gate off: a config error
    (scheduler,) = [p for p in local.component_patches() if p["name"] == "kube-scheduler"]
    assert scheduler["extraArgs"] == [{"key": "feature-gates", "value": "DRADeviceBindingConditions=false"}]
