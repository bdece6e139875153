"""Profiles are validated up front: one clear error naming the field, before any cluster work."""

from pathlib import Path

import pytest

from conformance.implementation.harness import Implementation
from conformance.implementation.profile import API_VERSION, KIND, ProfileError, load_profile
from conformance.plugin import DEFAULT_PROFILE

HEAD = f"apiVersion: {API_VERSION}\nkind: {KIND}\nname: x\nversion: '1'\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


def test_reference_profile_loads() -> None:
    loaded = load_profile(DEFAULT_PROFILE)
    assert loaded.profile.driver == "gpu.fabric.example.com"
    assert [p.name for p in loaded.profile.processes] == ["fabric-manager", "node-driver", "controller"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (HEAD + "", "driver"),
        (HEAD + "driver: d\ncapabilitys: {}\n", "capabilitys"),
        (HEAD + "driver: d\nprocesses: [{name: a, command: [x], ready: {http: /h}}]\n", "portFile"),
        (HEAD + "driver: d\nprocesses: [{name: A_b, command: [x]}]\n", "processes.0.name"),
        (HEAD + "driver: d\nprocesses: [{name: a, command: [x]}, {name: a, command: [y]}]\n", "unique"),
        ("- just a list\n", "mapping"),
    ],
)
def test_bad_profiles_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ProfileError, match=field) as raised:
        load_profile(write(tmp_path, text))
    assert str(tmp_path) in str(raised.value)


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "nope.yaml")


def test_placeholders_resolve_and_unknown_ones_are_refused(tmp_path: Path) -> None:
    loaded = load_profile(write(tmp_path, HEAD + "driver: d\n"))
    impl = Implementation(loaded, tmp_path / "kubeconfig", tmp_path / "work")
    assert impl.resolve("{kubeconfig}:{profile_dir}") == f"{tmp_path / 'kubeconfig'}:{tmp_path}"
    with pytest.raises(ProfileError, match="unknown placeholder"):
        impl.resolve("{nonsense}")
    with pytest.raises(ProfileError, match="earlier process"):
        impl.resolve("{url:fabric-manager}")


def test_binding_timeout_covers_what_the_profile_promises(tmp_path: Path) -> None:
    """A cluster the suite starts never times out a correct implementation that is as slow as it promised."""
    keep = load_profile(write(tmp_path, HEAD + "driver: d\npromises: {attachSeconds: 10}\n")).profile
    assert keep.binding_timeout_s() == 20  # one round: the attach and two PreBind polls
    slow = load_profile(write(tmp_path, HEAD + "driver: d\npromises: {attachSeconds: 45.5}\n")).profile
    assert slow.binding_timeout_s() == 56
    resched = HEAD + "driver: d\nbindingModel: reschedule-to-local\nfailureConditions: {d/r: reschedule}\n"
    assert load_profile(write(tmp_path, resched)).profile.binding_timeout_s() == 80  # two rounds of (30 + 10)


def test_node_local_model_loads_without_fabric_fields(tmp_path: Path) -> None:
    """bindingModel node-local: no fabric, so no fabric probe or counted entries; a failure condition means failure."""
    text = HEAD + "driver: d\nbindingModel: node-local\nfailureConditions: {d/not-ready: failure}\n"
    profile = load_profile(write(tmp_path, text)).profile
    assert profile.binding_model == "node-local" and not profile.has_fabric
    assert profile.binding_timeout_s() == 40  # one round: readying the device (30 s) and two PreBind polls
    assert profile.meaning("d/not-ready") == "failure"
    assert load_profile(write(tmp_path, HEAD + "driver: d\n")).profile.has_fabric


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("fabricEntries: counted\n", "fabricEntries: counted"),
        ("fabricProbe: {url: http://127.0.0.1:1/v1/attachments}\n", "fabricProbe"),
        ("published: {perModel: {a100: 2}}\n", "published.perModel"),
        ("failureConditions: {d/local: reschedule}\n", "'reschedule'"),
    ],
)
def test_node_local_model_refuses_fabric_fields(tmp_path: Path, extra: str, reason: str) -> None:
    with pytest.raises(ProfileError, match="bindingModel node-local has no fabric") as raised:
        load_profile(write(tmp_path, HEAD + "driver: d\nbindingModel: node-local\n" + extra))
    assert reason in str(raised.value)
