"""kind's own loader and validator judge the configs (conformance/kind/validate.py), with the real kind binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cluster.kind.config import NODE_IMAGES
from conformance.cluster.kind.validate import check_kind_config
from conformance.cluster.toolchain.kindbin import ensure_kind

ROOT = Path(__file__).resolve().parents[2]
HEAD = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"


@pytest.fixture(scope="module")
def kind() -> Path:
    return ensure_kind(progress=lambda _m: None)


def test_checked_in_config_is_accepted(kind: Path) -> None:
    verdict = check_kind_config(kind, ROOT / "kind-config.yaml", cwd=ROOT)
    assert verdict.ok, verdict.detail
    assert f"inspect --type=image {NODE_IMAGES[(1, 37)]}" in verdict.docker_calls


@pytest.mark.parametrize(
    ("body", "kind_says"),
    [
        ("nodes:\n- role: control-plane\n  bogus: 1\n", "field bogus not found"),
        ("nodes:\n- role: worker\n", "must have at least one control-plane node"),
        ("featureGates: {DRADeviceBindingConditions: maybe}\n", "unable to decode config"),
    ],
)
def test_kind_rejects_what_it_would_reject_on_docker(kind: Path, tmp_path: Path, body: str, kind_says: str) -> None:
    config = tmp_path / "kind.yaml"
    config.write_text(HEAD + body)
    verdict = check_kind_config(kind, config)
    assert not verdict.ok and kind_says in verdict.detail, verdict.detail
    assert not [c for c in verdict.docker_calls if c.split()[0] not in ("-v", "info", "ps")], "kind got past checks"
