"""The wrapper module's replace list is derived from the real upstream go.mod (tests/data, v1.37.2)."""

from pathlib import Path

import pytest

from conformance.cluster.toolchain.gomod import parse_gomod, staging_replacements, wrapper_gomod

UPSTREAM = Path(__file__).parent / "data" / "kubernetes-v1.37.2.go.mod"


def test_parses_upstream_kubernetes_gomod() -> None:
    mod = parse_gomod(UPSTREAM.read_text())
    assert mod.module == "k8s.io/kubernetes"
    assert mod.go == "1.26.0"
    assert mod.godebug == ("default=go1.26",)
    assert mod.require["k8s.io/api"] == "v0.0.0"
    assert mod.replace["k8s.io/api"] == "./staging/src/k8s.io/api"


def test_staging_replacements_cover_every_required_staging_module() -> None:
    mod = parse_gomod(UPSTREAM.read_text())
    replaces = staging_replacements(mod, "v0.37.2")
    staged = {path for path, target in mod.replace.items() if target.startswith("./staging/")}
    required_staged = staged & set(mod.require)
    assert set(replaces) == required_staged
    assert {"k8s.io/api", "k8s.io/client-go", "k8s.io/dynamic-resource-allocation"} <= set(replaces)
    # Published nowhere and required by nothing: must not be asked of the proxy.
    assert "k8s.io/sample-controller" not in replaces
    assert set(replaces.values()) == {"v0.37.2"}


def test_wrapper_gomod_round_trips_through_the_parser() -> None:
    text = wrapper_gomod(
        "example.local/w",
        "1.26.0",
        {"k8s.io/kubernetes": "v1.37.2"},
        ["k8s.io/kubernetes/cmd/kube-apiserver"],
        {"k8s.io/api": "v0.37.2"},
        ("default=go1.26",),
    )
    mod = parse_gomod(text)
    assert mod.require == {"k8s.io/kubernetes": "v1.37.2"}
    assert mod.replace == {"k8s.io/api": "k8s.io/api v0.37.2"}
    assert "tool (\n\tk8s.io/kubernetes/cmd/kube-apiserver\n)" in text


def test_gomod_without_module_is_rejected() -> None:
    with pytest.raises(ValueError, match="no module"):
        parse_gomod("go 1.26\n")
