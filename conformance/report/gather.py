"""Everything a run leaves for its reviewer, under `<reports>/artefacts/`, within a stated size bound.

- `implementation/`: each process's log (also the logs of killed runs);
- `control-plane/`: kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok logs (local provider);
- `objects/end.yaml` and `objects/failure-<scenario or test>.yaml`: claims, slices, taint rules, the run's pods,
  nodes and events as the run-wide record held them at the end and at each failure;
- `events.yaml`: every event of the run's namespaces; `fabric-probe.jsonl`: each change the probe showed.

Each file is cut to FILE_LIMIT and the folder to TOTAL_LIMIT; `index.json` lists every file with its original and
kept size, and the bounds. A log keeps its head and tail, the cut said in the file. A structured file stays readable
by its tools when cut: a YAML document keeps a prefix of each list, the cuts said in a comment at its top; the
gzipped record keeps its first records and ends with a line that counts the rest (a byte cut would leave neither a
valid gzip stream nor valid YAML).
"""

from __future__ import annotations

import gzip
import io
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FILE_LIMIT = 8 * 1024 * 1024
TOTAL_LIMIT = 128 * 1024 * 1024
HEAD = 1024 * 1024


@dataclass
class Artefacts:
    root: Path  # <reports>/artefacts
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0  # time spent gathering, added by the callers (Evidence times each of its steps)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def kept(self) -> int:
        return sum(f["keptBytes"] for f in self.files.values())

    def write(self, relative: str, data: bytes | str, what: str = "") -> str | None:
        """Write one artefact within the bounds; returns its path relative to the reports folder (or None when the
        total bound is reached, which index.json says)."""
        raw = data.encode() if isinstance(data, str) else data
        with self._lock:
            room = TOTAL_LIMIT - self.kept
            limit = min(FILE_LIMIT, room)
            if limit <= 0:
                self.files[relative] = {
                    "bytes": len(raw),
                    "keptBytes": 0,
                    "what": what,
                    "omitted": "total bound reached",
                }
                return None
            kept = raw
            if len(raw) > limit:
                cut = len(raw) - limit
                note = f"\n[... {cut} bytes cut by the size bound of {limit} bytes per artefact ...]\n".encode()
                head = min(HEAD, limit // 2)
                kept = raw[:head] + note + raw[len(raw) - max(0, limit - head - len(note)) :]
            path = self.root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(kept)
            self.files[relative] = {"bytes": len(raw), "keptBytes": len(kept), "what": what}
        return f"{self.root.name}/{relative}"

    def copy_logs(self, folder: Path, into: str, what: str) -> list[str]:
        """Copy every *.log under `folder` (not following links) into `into/`."""
        out = []
        if not folder.is_dir():
            return out
        for log in sorted(folder.rglob("*.log")):
            if log.is_file() and not log.is_symlink():
                written = self.write(f"{into}/{log.relative_to(folder)}", log.read_bytes(), what)
                if written:
                    out.append(written)
        return out

    def room(self) -> int:
        """Bytes the next file may have."""
        with self._lock:
            return min(FILE_LIMIT, TOTAL_LIMIT - self.kept)

    def write_yaml(self, relative: str, document: Any, what: str = "") -> str | None:
        text = _dump(document)
        if len(text.encode()) > (room := self.room()) > 0:
            text = fit_yaml(document, room)
        return self.write(relative, text, what)

    def write_jsonl_gz(self, relative: str, lines: list[str], what: str = "") -> str | None:
        """Gzipped JSON lines; past the bound, the first lines and a last one saying how many were cut."""
        data, _ = fit_jsonl_gz(lines, max(0, self.room()))
        return self.write(relative, data, what)

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Count the time of one gathering step (not nested)."""
        began = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self.seconds += time.monotonic() - began

    def write_index(self) -> None:
        index = {
            "fileLimitBytes": FILE_LIMIT,
            "totalLimitBytes": TOTAL_LIMIT,
            "keptBytes": self.kept,
            "gatherSeconds": round(self.seconds, 3),
            "files": self.files,
        }
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "index.json").write_text(json.dumps(index, indent=1))


def snapshot(recorder: Any, namespaces: set[str] | None, driver: str | None) -> dict[str, Any]:
    """The objects the record holds now: claims and pods (of `namespaces`, or all the run's), slices (of `driver`,
    or all), taint rules, nodes, and the events of those namespaces."""

    def ours(obj: dict[str, Any]) -> bool:
        return namespaces is None or obj["metadata"].get("namespace") in namespaces

    slices = [s for s in recorder.live("slice") if driver is None or (s.get("spec") or {}).get("driver") == driver]
    events = [
        r.obj | {"at": r.at, "resourceVersion": r.revision}
        for r in recorder.select(("event",))
        if namespaces is None or r.namespace in namespaces
    ]
    return {
        "takenAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "namespaces": sorted(namespaces) if namespaces is not None else "all of the run",
        "resourceClaims": [_clean(c) for c in recorder.live("claim") if ours(c)],
        "pods": [_clean(p) for p in recorder.live("pod") if ours(p)],
        "resourceSlices": [_clean(s) for s in slices],
        "deviceTaintRules": [_clean(r) for r in recorder.live("taintrule")],
        "nodes": [_clean(n) for n in recorder.live("node")],
        "events": events,
    }


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """Without managedFields: they double an object's size and say nothing a reviewer needs."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _dump(document: Any) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: a large snapshot in a fraction of the time
    return str(yaml.dump(document, Dumper=dumper, sort_keys=False))


def fit_yaml(document: Any, limit: int) -> str:
    """The document (a dict of lists, or a list) within `limit` bytes: each list keeps a prefix, the small lists
    whole first, the bytes left shared among the large ones; a comment at the top says what was cut."""
    doc = document if isinstance(document, dict) else {"": document}
    lists = {k: v for k, v in doc.items() if isinstance(v, list)}
    sizes = {k: [len(_dump([item]).encode()) for item in v] for k, v in lists.items()}
    frame = len(_dump({k: ([] if k in lists else v) for k, v in doc.items()}).encode())
    budget = int(limit * 0.98) - frame - 200 * (len(lists) + 1)  # room for the note; items dumped alone differ a bit
    kept: dict[str, int] = {}
    pending = sorted(lists, key=lambda k: sum(sizes[k]))
    for i, key in enumerate(pending):
        share = max(0, budget) // (len(pending) - i)
        total, n = 0, 0
        while n < len(sizes[key]) and total + sizes[key][n] <= share:
            total += sizes[key][n]
            n += 1
        kept[key] = n
        budget -= total
    trimmed = {k: (v[: kept[k]] if k in lists else v) for k, v in doc.items()}
    cuts = [f"{k or 'entries'}: kept {kept[k]} of {len(lists[k])}" for k in lists if kept[k] < len(lists[k])]
    note = f"# cut to the size bound of {limit} bytes per artefact; " + "; ".join(cuts) + "\n"
    return note + _dump(trimmed if isinstance(document, dict) else trimmed[""])


CHUNK_LINES = 500  # lines compressed between two size checks


def fit_jsonl_gz(lines: list[str], limit: int) -> tuple[bytes, int]:
    """(a valid gzip of as many whole lines as fit in `limit` bytes, plus a last line counting the rest; lines kept)."""
    out = io.BytesIO()
    kept = 0
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as gz:
        for start in range(0, len(lines), CHUNK_LINES):
            chunk = "".join(line + "\n" for line in lines[start : start + CHUNK_LINES]).encode()
            # Stop while a chunk's worth (at worst uncompressed) and the closing line still fit.
            if out.tell() + len(chunk) + 1024 > limit:
                break
            gz.write(chunk)
            gz.flush()  # out.tell() is then exact
            kept = min(len(lines), start + CHUNK_LINES)
        if kept < len(lines):
            cut = {"cut": len(lines) - kept, "kept": kept, "boundBytes": limit}
            gz.write((json.dumps(cut) + "\n").encode())
    return out.getvalue(), kept
