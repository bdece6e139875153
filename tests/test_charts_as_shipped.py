"""The contract describes charts as shipped (issue 36 item 5): several named ports per process ({port:NAME},
{url:PROCESS:NAME}, ready.port), a central process's token bound to a pod the scheduler places, a declared "never
reports failures" that is judged (fails) rather than skipped, and RDY-6 without a fault injector. Real subprocesses on
127.0.0.1 and stand-ins for the API; no cluster."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from conformance.implementation.harness import Implementation
from conformance.implementation.harness import resolve as resolving
from conformance.implementation.profile import API_VERSION, KIND, ProfileError, load_profile
from conformance.implementation.serviceaccount import place_holder_pod, scheduled_node
from conformance.suite.implementation import test_failure, test_readiness_failure, test_readiness_restart
from conformance.suite.implementation.declared_failures import NeverReports, judge_declared, never_reports
from conformance.suite.profilecheck import DECLARED_FAILS, plan, predict
from conformance.suite.scenario import REGISTRY, profile_gap

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
# Serves 200 on every GET of the ports given as arguments, then prints "serving" and waits.
SERVE = (
    "import sys, threading, http.server as h\n"
    "class H(h.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200); self.end_headers(); self.wfile.write(str(self.server.server_port).encode())\n"
    "    def log_message(self, *a): pass\n"
    "for port in sys.argv[1:]:\n"
    "    s = h.HTTPServer(('127.0.0.1', int(port)), H); threading.Thread(target=s.serve_forever, daemon=True).start()\n"
    "print('serving', flush=True); threading.Event().wait(60)\n"
)
WRITE = "import os, pathlib, time"
DONE = "print('done', flush=True); time.sleep(60)"


def _profile(tmp_path: Path, **fields: object) -> Path:
    doc = {"apiVersion": API_VERSION, "kind": KIND, "name": "t", "version": "1", "driver": "d.example.com", **fields}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _impl(tmp_path: Path, **fields: object) -> Implementation:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    return Implementation(load_profile(_profile(tmp_path, **fields)), kubeconfig, tmp_path / "work")


def test_a_process_with_two_named_ports_is_ready_on_one_and_reached_on_the_other(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    impl = _impl(
        tmp_path,
        processes=[
            {
                "name": "plugin",
                "command": [PY, "-c", SERVE, "{port:health}", "{port:metrics}"],
                "ready": {"http": "/healthz", "port": "health"},
            },
            {
                "name": "scraper",
                "command": [PY, "-c", f"{WRITE}; pathlib.Path({str(seen)!r}).write_text(os.environ['M']); {DONE}"],
                "env": {"M": "{url:plugin:metrics} {hostport:plugin:health}"},
                "ready": {"log": "done"},
            },
        ],
    )
    try:
        impl.start()
        metrics, health = seen.read_text().split()
        assert metrics.startswith("http://127.0.0.1:") and health.startswith("127.0.0.1:")
        assert metrics.rsplit(":", 1)[1] != health.rsplit(":", 1)[1], "two ports, not one"
        assert impl.resolve("{url:plugin:metrics}") == metrics, "picked once per run"
        with pytest.raises(ProfileError, match=r"needs an earlier process 'plugin' with \{port:admin\}"):
            impl.resolve("{url:plugin:admin}")
    finally:
        assert impl.stop() == []


@pytest.mark.parametrize(
    ("process", "message"),
    [
        ({"command": ["x", "{port:health}"], "ready": {"http": "/h", "port": "metrics"}}, "ready.port 'metrics' is"),
        ({"command": ["x", "{port:health}"], "ready": {"http": "/h"}}, "or ready.port naming a {port:NAME}"),
        ({"command": ["x"], "ready": {"log": "up", "port": "health"}}, "port is for ready.http"),
    ],
)
def test_named_ports_are_checked_where_the_profile_is_read(
    tmp_path: Path, process: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProfileError, match=message.replace("{", r"\{").replace("}", r"\}").replace(".", r"\.")):
        load_profile(_profile(tmp_path, processes=[{"name": "p", **process}]))


class _Core:
    """A CoreV1Api stand-in: pods are created without a node and placed on `node` at the second read."""

    def __init__(self, node: str) -> None:
        self.node, self.created, self.reads = node, [], 0

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any]) -> Any:
        self.created.append(body)
        return SimpleNamespace(spec=SimpleNamespace(node_name=None), metadata=SimpleNamespace(uid="u-1"))

    def read_namespaced_pod(self, name: str, namespace: str) -> Any:
        self.reads += 1
        return SimpleNamespace(spec=SimpleNamespace(node_name=self.node if self.reads > 1 else None))


def test_a_holder_pod_without_a_node_is_left_to_the_scheduler() -> None:
    core = _Core("node-2")
    ref = place_holder_pod(core, "ns", "driver", None)  # type: ignore[arg-type]
    [body] = core.created
    assert "nodeName" not in body["spec"] and ref["name"].startswith("credential-driver-scheduled-")
    assert scheduled_node(core, "ns", ref["name"], timeout=10) == "node-2"  # type: ignore[arg-type]


def test_a_central_process_token_is_bound_to_a_scheduled_pod_and_the_run_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    placed: list[str | None] = []

    def place(core: Any, namespace: str, sa: str, node: str | None) -> dict[str, str]:
        placed.append(node)
        return {"kind": "Pod", "apiVersion": "v1", "name": f"credential-{sa}-scheduled-x", "uid": "u"}

    def kubeconfig(admin: Path, core: Any, namespace: str, sa: str, path: Path, bound_to: Any = None) -> Path:
        path.write_text(f"bound to {bound_to['name']}")
        return path

    monkeypatch.setattr(resolving, "place_holder_pod", place)
    monkeypatch.setattr(resolving, "scheduled_node", lambda core, ns, name: "node-3")
    monkeypatch.setattr(resolving, "service_account_kubeconfig", kubeconfig)
    monkeypatch.setattr(resolving.client, "CoreV1Api", lambda api: None)
    impl = _impl(tmp_path)
    impl.workdir.mkdir(parents=True)
    impl._client = object()  # type: ignore[assignment]
    impl.progress = said.append
    path = impl.resolve("{pod_kubeconfig:my-system/my-driver}")
    assert Path(path).read_text() == "bound to credential-my-driver-scheduled-x" and placed == [None]
    assert impl.placed == {"my-system/my-driver": "node-3"}
    assert any("placed by the scheduler on node node-3" in line for line in said), said
    assert impl.resolve("{pod_kubeconfig:my-system/my-driver}") == path and placed == [None], "once per run"


def _nodelocal(tmp_path: Path, **changes: object) -> Any:
    raw = yaml.safe_load((ROOT / "fixtures" / "profiles" / "reference-nodelocal.yaml").read_text())
    raw.update(changes)
    path = tmp_path / "nodelocal.yaml"
    path.write_text(yaml.safe_dump(raw).replace("{profile_dir}", str(ROOT / "fixtures" / "profiles")))
    return load_profile(path).profile


def test_a_declared_never_reporting_stack_fails_the_failure_requirements_without_an_injector(tmp_path: Path) -> None:
    assert test_failure and test_readiness_failure  # their scenarios are registered
    raw = yaml.safe_load((ROOT / "fixtures" / "profiles" / "reference-nodelocal.yaml").read_text())
    prof = _nodelocal(
        tmp_path,
        faultInjector=None,
        capabilities={k: v for k, v in raw["capabilities"].items() if k != "attachFailureReporting"},
        promises={**raw["promises"], "reportsFailures": False},
    )
    for name in ("attach-failure", "readiness-failure"):
        assert profile_gap(REGISTRY[name], prof) is None, f"{name} is judged on the declaration, not skipped"
    declared = never_reports(prof, "RDY-5", "readying")
    assert isinstance(declared, NeverReports)
    assert declared.reason.startswith("the profile declares promises.reportsFailures: false")
    assert "KEP-5007 has the controller set a failure condition True" in declared.reason
    with pytest.raises(pytest.fail.Exception, match="reportsFailures: false"):
        judge_declared(declared)
    judge_declared(object())  # anything else: the test goes on to judge what was observed
    rows = {row.requirement: row for row in plan(prof)}
    assert rows["RDY-5"].action == "fail" and DECLARED_FAILS in rows["RDY-5"].reason
    said = predict(prof, list(rows.values()))
    assert "  RDY-5 fail: readiness-failure (fails: the profile declares promises.reportsFailures: false)" in said
    assert "implementation: failure" in said[-1], said[-1]
    reporting = _nodelocal(tmp_path, faultInjector=None)
    assert never_reports(reporting, "RDY-5", "readying") is None
    assert profile_gap(REGISTRY["readiness-failure"], reporting) is not None, "no injector: skipped as before"


def test_never_reporting_and_claiming_failure_reporting_contradict(tmp_path: Path) -> None:
    raw = yaml.safe_load((ROOT / "fixtures" / "profiles" / "reference-nodelocal.yaml").read_text())
    with pytest.raises(ProfileError, match="one of them"):
        _nodelocal(tmp_path, promises={**raw["promises"], "reportsFailures": False})


def test_rdy6_runs_without_a_fault_injector(tmp_path: Path) -> None:
    """Its before-readying step needs none: the scenario runs its steps that need no injector and says which did not
    run (test_readiness_restart.HELD)."""
    assert {"readying-in-flight", "ready-unreported"} == test_readiness_restart.HELD
    prof = _nodelocal(tmp_path, faultInjector=None)
    assert profile_gap(REGISTRY["readiness-restart"], prof) is None
