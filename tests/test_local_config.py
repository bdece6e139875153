"""The configuration the local provider hands to kwokctl and kube-scheduler (no cluster needed)."""

from pathlib import Path

from conformance.cluster.providers.base import ClusterSpec
from conformance.cluster.providers.local import PORT_OPTIONS, LocalProvider, scheduler_config
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
