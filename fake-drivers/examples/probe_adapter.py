"""A worked example: serve the suite's fabric probe in front of a fabric manager whose API differs.

Your fabric manager has its own inventory API; the conformance suite reads the fabric through one small protocol
(docs/fabric-protocols.openapi.json, path /v1/attachments). Rather than change your manager, run an adapter like
this one as one of your profile's processes and point `fabricProbe.url` at it:

    processes:
      - name: probe-adapter
        command: ["python", "{profile_dir}/../../fake-drivers/examples/probe_adapter.py",
                  "--manager", "{url:fabric-manager}", "--port-file", "{port_file}"]
        portFile: true
        ready: {http: /v1/attachments}
    fabricProbe: {url: "{url:probe-adapter}/v1/attachments"}

Here the "different" API is the reference fabric manager's inventory: GET /v1/devices (every device with its
`uuid`, `fabric`, `model`, `state` (free | attaching | attached | detaching | failed) and `node`) and GET
/v1/fabrics (the nodes each fabric reaches). The adapter maps them, on every request, to the probe's answer:
`attachments` (every device not free, with its node and state) and `free` (free devices per fabric and model, and
the nodes that fabric reaches). It keeps no state, so it never disagrees with the fabric for longer than one
request. Standard library only, so it can be copied and adapted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

IN_USE = ("attaching", "attached", "detaching")


def probe_answer(devices: list[dict[str, Any]], reach: dict[str, list[str]]) -> dict[str, Any]:
    """The probe's body for one read of the inventory."""
    attachments = [
        {
            "device": d["uuid"],
            "name": d["name"],
            "fabric": d["fabric"],
            "model": d["model"],
            "node": d["node"],
            "state": d["state"],
            "since": d["stateSince"],
        }
        for d in devices
        if d["state"] in IN_USE and d.get("node")
    ]
    total = Counter((d["fabric"], d["model"]) for d in devices)
    free = Counter((d["fabric"], d["model"]) for d in devices if d["state"] == "free")
    return {
        "attachments": attachments,
        "free": [
            {"fabric": f, "model": m, "free": free[(f, m)], "total": n, "nodes": reach.get(f, [])}
            for (f, m), n in total.items()
        ],
    }


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def serve(manager: str, port: int, port_file: Path | None) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/v1/attachments":
                self.send_error(404)
                return
            try:
                reach = {f["id"]: f["nodes"] for f in _get(f"{manager}/v1/fabrics")["fabrics"]}
                body = json.dumps(probe_answer(_get(f"{manager}/v1/devices")["devices"], reach)).encode()
            except OSError as exc:  # the fabric manager is away: say so, never answer from stale data
                self.send_error(502, f"fabric manager {manager}: {exc}")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    if port_file is not None:
        port_file.write_text(str(server.server_address[1]))
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manager", required=True, help="base URL of the fabric manager's inventory API")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, default=None)
    args = parser.parse_args()
    serve(args.manager.rstrip("/"), args.port, args.port_file)


if __name__ == "__main__":
    main()
