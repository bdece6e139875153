"""Condition names validated as kube-apiserver validates them (IsQualifiedName of k8s.io/apimachinery): the cases
are those of apimachinery's own validation tests, plus the names real stacks publish."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conformance.cli import main
from conformance.implementation.names import qualified_name_problems
from conformance.implementation.profile import API_VERSION, KIND, ProfileError, load_profile
from conformance.suite.profilecheck import check

VALID = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
    "BindingConditions",  # dra-example-driver
    "BindingFailureConditions",
    "FabricDeviceReschedule",  # CoHDI
    "gpu.fabric.example.com/attach-failed",
]
INVALID = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",  # the prefix is lowercase only
    "example_com/abc",
    "example.com/",
    "/simple",
    "",
    "a" * 64,
    "a" * 254 + "/abc",
    "simple\n",  # a trailing newline is not a name ($ in Python would let it through)
]


@pytest.mark.parametrize("name", VALID)
def test_names_the_api_accepts_are_accepted(name: str) -> None:
    assert qualified_name_problems(name) == []


@pytest.mark.parametrize("name", INVALID)
def test_names_the_api_refuses_are_refused(name: str) -> None:
    assert qualified_name_problems(name)


def _profile(tmp_path: Path, conditions: dict[str, str]) -> Path:
    doc = {"apiVersion": API_VERSION, "kind": KIND, "name": "t", "version": "1", "driver": "gpu.example.com"}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc | {"failureConditions": conditions}))
    return path


def test_profile_check_accepts_unprefixed_condition_names(tmp_path: Path) -> None:
    loaded = load_profile(_profile(tmp_path, {"BindingFailureConditions": "failure"}))
    assert check(loaded).errors == []


def test_a_profile_with_a_name_the_api_refuses_names_the_rule(tmp_path: Path) -> None:
    path = _profile(tmp_path, {"Gpu.example.com/failed": "failure"})
    with pytest.raises(ProfileError, match=r"failureConditions: 'Gpu.example.com/failed'.*prefix part"):
        load_profile(path)
    result = CliRunner().invoke(main, ["profile", "check", str(path)])
    assert result.exit_code != 0 and "prefix part" in result.output, result.output
