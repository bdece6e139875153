"""kind configurations generated per release (conformance/kind/config.py), and the checked-in kind-config.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.cluster.audit import POLICY
from conformance.cluster.kind.config import (
    AUDIT_DIR_IN_NODE,
    FABRIC_NODE_PORT,
    SCHEDULER_CONFIG_IN_NODE,
    KindConfigError,
    dump,
    kind_config,
    scheduler_file,
    worker_name,
    write_kind_files,
)
from conformance.cluster.providers.base import FABRIC_LABEL
from conformance.cluster.versions import DEFAULT_VERSION, RELEASES, parse_version

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "kindest/node:v1.35.4"


def _config(version: str, **options: object) -> dict:
    return kind_config(parse_version(version), scheduler_config_path="/s.yaml", image=IMAGE, **options)  # type: ignore[arg-type]


def test_checked_in_kind_config_is_the_generated_one(tmp_path: Path) -> None:
    config, scheduler = tmp_path / "kind-config.yaml", ROOT / "fixtures" / "kind" / "scheduler-config.yaml"
    write_kind_files(config, tmp_path / "scheduler.yaml", parse_version(DEFAULT_VERSION), 20)
    generated = config.read_text().replace(str(tmp_path / "scheduler.yaml"), "fixtures/kind/scheduler-config.yaml")
    assert (ROOT / "kind-config.yaml").read_text() == generated, "run `make kind-config` and commit the result"
    assert scheduler.read_text() == (tmp_path / "scheduler.yaml").read_text()


@pytest.mark.parametrize("minor", sorted(RELEASES))
def test_gates_and_runtime_config_follow_the_release(minor: tuple[int, int]) -> None:
    release = RELEASES[minor]
    config = _config(release.latest_patch)
    assert config["featureGates"] == dict.fromkeys(release.gates, True)
    runtime = release.runtime_config
    expected_runtime = dict(i.split("=", 1) for i in runtime.split(",")) if runtime else None
    assert config.get("runtimeConfig") == expected_runtime
    assert "enable_cdi = true" in config["containerdConfigPatches"][0]


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.37"])
def test_scheduler_config_is_mounted_with_its_kubeconfig_and_raised_client_rates(version: str) -> None:
    """Every release: the config replaces kubeadm's --kubeconfig flag, so it must name scheduler.conf itself."""
    plane = _config(version)["nodes"][0]
    mount = {"hostPath": "/s.yaml", "containerPath": SCHEDULER_CONFIG_IN_NODE, "readOnly": True}
    assert plane["extraMounts"] == [mount]
    patch = yaml.safe_load(plane["kubeadmConfigPatches"][0])
    assert patch["scheduler"]["extraArgs"] == {"config": SCHEDULER_CONFIG_IN_NODE}
    assert patch["controllerManager"]["extraArgs"] == {"kube-api-qps": "500", "kube-api-burst": "1000"}
    assert "apiVersion" not in patch, "kind converts only apiVersion-less map extraArgs for kubeadm v1beta4"
    connection = yaml.safe_load(scheduler_file(parse_version(version), 7))["clientConnection"]
    assert connection == {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 500, "burst": 1000}


def test_scheduler_timeout_is_set_only_where_the_release_has_it() -> None:
    timeout = yaml.safe_load(scheduler_file(parse_version("1.37"), 7))
    assert timeout["profiles"][0]["pluginConfig"][0]["args"]["bindingTimeout"] == "7s"
    assert "pluginConfig" not in yaml.safe_load(scheduler_file(parse_version("1.34"), 7))["profiles"][0]


def test_gate_off_drops_the_timeout_because_the_scheduler_would_refuse_it() -> None:
    config = _config("1.37", gate_overrides={"DRADeviceBindingConditions": False})
    assert config["featureGates"]["DRADeviceBindingConditions"] is False
    off = {"DRADeviceBindingConditions": False}
    assert "pluginConfig" not in yaml.safe_load(scheduler_file(parse_version("1.37"), 7, off))["profiles"][0]


def test_workers_are_labelled_round_robin_and_the_probe_port_is_on_loopback() -> None:
    nodes = _config("1.37", workers=3)["nodes"]
    assert [n["role"] for n in nodes] == ["control-plane", "worker", "worker", "worker"]
    assert [n["labels"][FABRIC_LABEL] for n in nodes[1:]] == ["fabric-0", "fabric-1", "fabric-0"]
    assert {n["image"] for n in nodes} == {IMAGE}
    assert nodes[0]["extraPortMappings"] == [
        {"containerPort": FABRIC_NODE_PORT, "hostPort": FABRIC_NODE_PORT, "listenAddress": "127.0.0.1"}
    ]
    assert [worker_name(i) for i in range(3)] == [
        "dra-conformance-worker",
        "dra-conformance-worker2",
        "dra-conformance-worker3",
    ]


def test_bad_requests_are_refused_with_the_way_out() -> None:
    with pytest.raises(KindConfigError, match="at least 2 workers"):
        _config("1.37", workers=1)
    with pytest.raises(KindConfigError, match="--kind-image"):
        kind_config(parse_version("1.35"), scheduler_config_path="/s.yaml")
    assert "@sha256:" in kind_config(parse_version("1.37"), scheduler_config_path="/s")["nodes"][0]["image"]


def test_dump_round_trips_and_keeps_patches_readable() -> None:
    config = _config("1.36")
    text = dump(config)
    assert yaml.safe_load(text) == config
    assert "- |\n" in text and text.startswith("# Generated")


def test_1_38_sets_no_gate_and_needs_a_node_image_by_flag() -> None:
    with pytest.raises(KindConfigError, match="--kind-image"):
        kind_config(parse_version("1.38"), scheduler_config_path="/s.yaml")
    config = _config("1.38.0-beta.0")
    assert config["featureGates"] == {} and "runtimeConfig" not in config
    assert config["nodes"][0]["extraMounts"], "1.38 keeps the configurable bindingTimeout"


def test_a_locked_gate_turned_off_is_refused_with_the_reason() -> None:
    with pytest.raises(KindConfigError, match=r"locked on in Kubernetes 1\.38"):
        _config("1.38", gate_overrides={"DRADeviceBindingConditions": False})


def test_the_providers_config_mounts_an_audit_folder_into_the_apiserver(tmp_path: Path) -> None:
    """The kind provider's clusters log service accounts' requests (cluster/audit.py) into a host folder; the
    checked-in kind-config.yaml (no audit_dir) has none."""
    assert "apiServer" not in yaml.safe_load(_config("1.37")["nodes"][0]["kubeadmConfigPatches"][0])
    audit = tmp_path / "audit"
    config = write_kind_files(
        tmp_path / "kind.yaml", tmp_path / "s.yaml", parse_version("1.37"), 20, image=IMAGE, audit_dir=str(audit)
    )
    plane = yaml.safe_load(config.read_text())["nodes"][0]
    assert {"hostPath": str(audit), "containerPath": AUDIT_DIR_IN_NODE} in plane["extraMounts"]
    server = yaml.safe_load(plane["kubeadmConfigPatches"][0])["apiServer"]
    assert server["extraArgs"] == {
        "audit-policy-file": f"{AUDIT_DIR_IN_NODE}/audit-policy.yaml",
        "audit-log-path": f"{AUDIT_DIR_IN_NODE}/audit.log",
    }
    assert server["extraVolumes"][0]["hostPath"] == server["extraVolumes"][0]["mountPath"] == AUDIT_DIR_IN_NODE
    assert yaml.safe_load((audit / "audit-policy.yaml").read_text()) == POLICY
