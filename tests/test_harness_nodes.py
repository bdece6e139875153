"""Harness parts issue 27 adds: per-node processes and node hooks that follow the nodes (those there at the start and
those that join or leave during the run), HTTPS with a CA the harness makes ({https_url}, {hostport}, {tls_cert},
{tls_key}, {ca_file}), and where each placeholder may stand. Real subprocesses and a real TLS handshake on 127.0.0.1;
the nodes come from a stand-in NodeSource (no cluster here: tests/selftest/test_per_node_harness.py follows a real
cluster's nodes and checks the pod-bound tokens)."""

from __future__ import annotations

import json
import queue
import socket
import ssl
import sys
import time
from pathlib import Path

import pytest
import yaml

from conformance.cluster.waits import wait_for
from conformance.implementation import endpoints
from conformance.implementation.harness import Implementation
from conformance.implementation.nodefollow import WATCH_SECONDS
from conformance.implementation.profile import API_VERSION, KIND, Scope, load_profile, placeholder_problem
from conformance.implementation.tls import RunCA

PY = sys.executable
# writes its argv[2:] as JSON to argv[1], says ready, sleeps
RECORD = (
    "import json, sys, os, pathlib, time; pathlib.Path(sys.argv[1]).write_text(json.dumps(sys.argv[2:] + "
    "[os.environ.get('X', '')])); print('ready', flush=True); time.sleep(120)"
)


class StandInNodes:
    """Nodes as a test says they are: list() gives the current set, events() hands out what the test pushed."""

    def __init__(self, names: set[str]) -> None:
        self.names = set(names)
        self.version = 1
        self.pushed: queue.Queue[tuple[str, str, str]] = queue.Queue()

    def list(self) -> tuple[set[str], str]:
        return set(self.names), str(self.version)

    def events(self, since: str) -> list[tuple[str, str, str]]:
        try:
            return [self.pushed.get(timeout=min(0.2, WATCH_SECONDS))]
        except queue.Empty:
            return []

    def push(self, kind: str, name: str) -> None:
        self.version += 1
        (self.names.add if kind == "ADDED" else self.names.discard)(name)
        self.pushed.put((kind, name, str(self.version)))


def _impl(tmp_path: Path, nodes: StandInNodes | None = None, **fields: object) -> Implementation:
    doc = {"apiVersion": API_VERSION, "kind": KIND, "name": "t", "version": "1", "driver": "d.example.com", **fields}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    return Implementation(load_profile(path), kubeconfig, tmp_path / "work", nodes=nodes)


def _seen(path: Path) -> list[str]:
    return wait_for(
        lambda: json.loads(path.read_text()) if path.exists() else None,
        lambda v: v is not None,
        timeout=10,
        expected=f"{path} written",
    )


def test_per_node_processes_and_node_hooks_follow_the_nodes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    trail = tmp_path / "trail"
    trail.write_text("")
    append = "import sys, pathlib; p = pathlib.Path(sys.argv[1]); p.write_text(p.read_text() + sys.argv[2] + ' ')"
    nodes = StandInNodes({"node-a", "node-b"})
    impl = _impl(
        tmp_path,
        nodes,
        hooks={"node": [{"name": "provider-id", "command": [PY, "-c", append, str(trail), "hook:{node}"]}]},
        processes=[
            {
                "name": "plugin",
                "perNode": True,
                "command": [PY, "-c", RECORD, f"{out}/{{node}}.json", "{node}", "--port", "{port}"],
                "env": {"X": "on-{node}"},
                "ready": {"log": "ready"},
            }
        ],
    )
    impl.start()
    try:
        assert trail.read_text() == "hook:node-a hook:node-b "
        assert sorted(r.name for r in impl.running) == ["plugin@node-a", "plugin@node-b"]
        seen_a = _seen(out / "node-a.json")
        assert seen_a[0] == "node-a" and seen_a[-1] == "on-node-a"
        assert seen_a[2] != _seen(out / "node-b.json")[2], "each instance gets its own {port}"
        assert (impl.workdir / "plugin@node-a.log").exists()

        nodes.push("ADDED", "node-c")  # a node joins during the run: its hook, then its instance
        wait_for(
            lambda: sorted(r.name for r in impl.running),
            lambda names: "plugin@node-c" in names,
            timeout=15,
            expected="plugin@node-c started",
        )
        assert trail.read_text() == "hook:node-a hook:node-b hook:node-c "
        assert _seen(out / "node-c.json")[0] == "node-c"

        gone = next(r for r in impl.running if r.node == "node-a")
        nodes.push("DELETED", "node-a")  # a node leaves: its instance stops with it
        wait_for(lambda: gone.proc.poll(), lambda code: code is not None, timeout=20, expected="plugin@node-a stopped")
        assert sorted(r.name for r in impl.running) == ["plugin@node-b", "plugin@node-c"]

        before = {r.name: r.proc.pid for r in impl.running}
        impl.restart("plugin")  # a role naming a perNode process restarts every instance
        after = {r.name: r.proc.pid for r in impl.running}
        assert after.keys() == before.keys() and all(after[n] != before[n] for n in before)
    finally:
        assert impl.stop() == []
    assert impl.running == []


def test_a_node_that_leaves_during_its_setup_is_no_fault_one_that_stays_is(tmp_path: Path) -> None:
    """A plugin that fails to start for a node deleted meanwhile (IMP-16 deletes the node it added) is no problem of
    the run; one that fails for a node still there is reported at the end."""
    script = (
        "import sys, time\n"
        "if sys.argv[1] != 'node-a':\n    time.sleep(0.5)\n    sys.exit(1)\n"
        "print('ready', flush=True)\ntime.sleep(120)\n"
    )
    nodes = StandInNodes({"node-a"})
    impl = _impl(
        tmp_path,
        nodes,
        processes=[
            {"name": "plugin", "perNode": True, "command": [PY, "-c", script, "{node}"], "ready": {"log": "ready"}}
        ],
    )
    said: list[str] = []
    impl.progress = said.append
    impl.start()
    try:
        nodes.push("ADDED", "node-gone")
        nodes.names.discard("node-gone")  # deleted while its plugin starts
        wait_for(lambda: list(said), lambda seen: any("left during" in m for m in seen), timeout=15, expected="noticed")
        nodes.push("DELETED", "node-gone")
        nodes.push("ADDED", "node-stays")
        wait_for(lambda: list(said), lambda seen: any("setup failed" in m for m in seen), timeout=15, expected="said")
        assert [r.name for r in impl.running] == ["plugin@node-a", "plugin@node-stays"]
    finally:
        problems = impl.stop()
    assert len(problems) == 2, problems  # the failed setup, and the instance that had exited before the end
    assert "node node-stays joined, its per-node setup failed" in problems[0], problems


def _https_server(tmp_path: Path) -> str:
    """An HTTPS server on argv[1] with the certificate and key argv[2], argv[3]: /healthz and a probe document."""
    script = tmp_path / "serve.py"
    script.write_text(
        "import http.server, json, ssl, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = json.dumps({'attachments': [], 'path': self.path}).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "    def log_message(self, *a): pass\n"
        "s = http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H)\n"
        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[2], sys.argv[3])\n"
        "s.socket = c.wrap_socket(s.socket, server_side=True)\n"
        "s.serve_forever()\n"
    )
    return str(script)


def _tls_process(tmp_path: Path) -> dict[str, object]:
    """Process "fabric": the HTTPS server above with the harness's certificate, ready over HTTPS."""
    return {
        "name": "fabric",
        "tls": True,
        "command": [PY, _https_server(tmp_path), "{port}", "{tls_cert:fabric}", "{tls_key:fabric}"],
        "ready": {"http": "/healthz"},
    }


def test_tls_process_gets_a_certificate_of_the_run_ca_and_its_clients_the_addresses(tmp_path: Path) -> None:
    client_out = tmp_path / "client.json"
    impl = _impl(
        tmp_path,
        processes=[
            _tls_process(tmp_path),
            {
                "name": "client",
                "command": [PY, "-c", RECORD, str(client_out), "{https_url:fabric}", "{hostport:fabric}", "{ca_file}"],
                "env": {"X": "{url:fabric}"},
                "ready": {"log": "ready"},
            },
        ],
        fabricProbe={"url": "{https_url:fabric}/v1/attachments"},  # no caFile: the run's CA
    )
    impl.start()
    try:
        https_url, hostport, ca_file, plain = _seen(client_out)
        port = impl.running[0].port
        assert (https_url, hostport, plain) == (
            f"https://127.0.0.1:{port}",
            f"127.0.0.1:{port}",
            f"http://127.0.0.1:{port}",
        )
        with endpoints.urlopen(f"{https_url}/v1/attachments", timeout=5) as response:
            assert json.load(response)["path"] == "/v1/attachments"
        for host in ("127.0.0.1", "localhost"):  # the serving certificate names both, and chains to {ca_file}
            context = ssl.create_default_context(cafile=ca_file)
            with (
                socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
                context.wrap_socket(raw, server_hostname=host) as tls,
            ):
                assert tls.version()
        with (  # and nothing else trusts it
            pytest.raises(ssl.SSLCertVerificationError),
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ):
            ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")
        key = Path(impl.resolve("{tls_key:fabric}"))
        assert key.stat().st_mode & 0o077 == 0, "the key is readable by its owner only"
    finally:
        assert impl.stop() == []


def test_a_restarted_tls_process_keeps_its_certificate(tmp_path: Path) -> None:
    impl = _impl(
        tmp_path,
        processes=[_tls_process(tmp_path)],
    )
    impl.start()
    try:
        cert = Path(impl.resolve("{tls_cert:fabric}")).read_bytes()
        started = time.monotonic()
        impl.restart("fabric")  # ready again over HTTPS with the same certificate and CA
        assert time.monotonic() - started < 30
        assert Path(impl.resolve("{tls_cert:fabric}")).read_bytes() == cert
    finally:
        assert impl.stop() == []


def test_a_process_with_a_certificate_of_the_profiles_own_ca(tmp_path: Path) -> None:
    """Not tls: true: the profile gives the certificate and its CA (here made by another CA than the run's);
    ready.caFile has the readiness asked over HTTPS with that CA, the endpoint's caFile does the same for the probe."""
    own = RunCA(tmp_path / "own-ca")
    cert, key = own.ensure_serving("fabric")
    ca = str(own.ensure_ca())
    impl = _impl(
        tmp_path,
        processes=[
            {
                "name": "fabric",
                "command": [PY, _https_server(tmp_path), "{port}", str(cert), str(key)],
                "ready": {"http": "/healthz", "caFile": ca},
            }
        ],
        fabricProbe={"url": "{https_url:fabric}/v1/attachments", "caFile": ca},
    )
    impl.start()
    try:
        with endpoints.urlopen(impl.resolve("{https_url:fabric}/v1/attachments"), timeout=5) as response:
            assert json.load(response)["path"] == "/v1/attachments"
        assert not impl.ca.ca_file.exists(), "no run CA made for a profile that brings its own"
    finally:
        assert impl.stop() == []


PER_NODE = Scope(per_node=True)


@pytest.mark.parametrize(
    ("key", "arg", "scope", "problem"),
    [
        ("node", None, Scope(), "only in a perNode process or a node hook"),
        ("node", None, PER_NODE, None),
        ("pod_kubeconfig", "ns/sa", Scope(), None),  # outside per node: a pod the scheduler places
        ("pod_kubeconfig", "ns/sa", PER_NODE, None),
        ("pod_kubeconfig", "ns/sa@node-3", Scope(), None),
        ("pod_kubeconfig", "sa@node-3", Scope(), "NAMESPACE/SERVICEACCOUNT@NODE"),
        ("url", "plugin", Scope(per_node_processes=frozenset({"plugin"})), "runs per node"),
        ("hostport", "plugin", Scope(per_node=True, per_node_processes=frozenset({"plugin"})), None),
        ("https_url", "fm", Scope(ported=frozenset()), "needs an earlier process 'fm' with a port"),
        ("tls_cert", "fm", Scope(tls=frozenset()), "needs a process 'fm' with tls: true"),
        ("tls_key", "fm", Scope(tls=frozenset({"fm"})), None),
        ("ca_file", None, Scope(), None),
        ("ca_file", "x", Scope(), "takes no argument"),
        ("port", "metrics", Scope(), "only in a process's command or env"),
        ("port", "Metrics", Scope(), "lowercase alphanumerics"),
        ("url", "fm:metrics", Scope(named_ports=frozenset()), "needs an earlier process 'fm' with {port:metrics}"),
        ("url", "fm:metrics", Scope(named_ports=frozenset({"fm:metrics"})), None),
        ("https_url", "fm:Metrics", Scope(), "lowercase alphanumerics"),
        ("hostport", "plugin:health", Scope(per_node_processes=frozenset({"plugin"})), "runs per node"),
    ],
)
def test_where_each_placeholder_may_stand(key: str, arg: str | None, scope: Scope, problem: str | None) -> None:
    found = placeholder_problem(key, arg, scope)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_the_reference_fabric_manager_on_https_with_the_run_ca(tmp_path: Path) -> None:
    """reference-https.yaml's fabric manager as the harness starts it: HTTPS with the run CA, ready over HTTPS, the
    probe at {https_url:...} read with that CA and no caFile."""
    fabric = Path(__file__).resolve().parent.parent / "fixtures" / "profiles" / "reference" / "fabric.yaml"
    impl = _impl(
        tmp_path,
        processes=[
            {
                "name": "fabric-manager",
                "command": [
                    str(Path(PY).parent / "fake-fabric-manager"),
                    "--config",
                    str(fabric),
                    "--db",
                    "{workdir}/fabric.db",
                    "--port",
                    "0",
                    "--port-file",
                    "{port_file}",
                    "--tls-cert",
                    "{tls_cert:fabric-manager}",
                    "--tls-key",
                    "{tls_key:fabric-manager}",
                ],
                "portFile": True,
                "tls": True,
                "ready": {"http": "/healthz"},
            }
        ],
        fabricProbe={"url": "{https_url:fabric-manager}/v1/attachments"},
    )
    impl.start()
    try:
        url = impl.resolve("{https_url:fabric-manager}/v1/attachments")
        with endpoints.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["attachments"] == [] and {f["fabric"] for f in body["free"]} == {"fabric-0", "fabric-1"}
    finally:
        assert impl.stop() == []
