"""Reading CDI specs on a kind node (conformance/cluster/kind/nodeexec.py) with the node's shell faked (said so): a
spec removed between the listing and the read is left out, not an error (seen on kind: NodeUnprepareResources
removed a spec while NODE-1 read them, and `stat` printed nothing)."""

from __future__ import annotations

import base64
import json

import pytest

from conformance.cluster.kind import nodeexec


def test_a_spec_removed_while_it_is_read_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"kind": "gpu.fabric.example.com/gpu", "devices": [{"name": "d0", "containerEdits": {"env": ["A=1"]}}]}
    body = base64.b64encode(json.dumps(spec).encode()).decode()
    out = f"/var/run/cdi/a.json\t1796459350.5\t{body}\n/var/run/cdi/gone.json\t\t\n"
    monkeypatch.setattr(nodeexec, "node_exec", lambda node, *argv: out)
    specs = nodeexec.cdi_specs("worker")
    assert [(s.path, s.mtime, s.kind) for s in specs] == [("/var/run/cdi/a.json", 1796459350.5, spec["kind"])]
    assert specs[0].edits("d0") == {"env": ["A=1"]}


def test_a_containers_end_is_read_from_cri_times() -> None:
    from conformance.cluster.kind.nodeexec import _rfc3339

    assert _rfc3339("2026-12-07T00:45:12.123456789Z") == pytest.approx(1796604312.123456789)
    assert _rfc3339("2026-12-07T01:45:12.5+01:00") == pytest.approx(1796604312.5)
    assert _rfc3339("0001-01-01T00:00:00Z") is None and _rfc3339("") is None and _rfc3339(None) is None
