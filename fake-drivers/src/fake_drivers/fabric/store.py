"""SQLite state of the fabric: one row per physical device, with its attachment state.

Every state change is one conditional UPDATE (``WHERE state = <expected>``), so the database, not the caller,
decides who wins a race: exactly one reservation of a free device succeeds, whatever the number of clients
or processes sharing the file.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from .config import DeviceSpec

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS devices (
    uuid        TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    fabric      TEXT NOT NULL,
    model       TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    attributes  TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('free', 'attaching', 'attached', 'detaching')),
    node        TEXT,
    op_id       TEXT,
    state_since REAL NOT NULL,
    last_error  TEXT,
    generation  INTEGER NOT NULL DEFAULT 0,
    CHECK ((state = 'free') = (node IS NULL))
);
CREATE INDEX IF NOT EXISTS devices_fabric_state ON devices (fabric, state);
-- What the nodes say they use: the node half of the driver marks a device it prepared for a claim (the kubelet's
-- NodePrepareResources) and unmarks it on NodeUnprepareResources. Kept while the device stays attached to that node.
CREATE TABLE IF NOT EXISTS uses (
    uuid   TEXT NOT NULL,
    claim  TEXT NOT NULL,
    node   TEXT NOT NULL,
    since  REAL NOT NULL,
    PRIMARY KEY (uuid, claim)
);
"""


class DeviceState(StrEnum):
    FREE = "free"
    ATTACHING = "attaching"
    ATTACHED = "attached"
    DETACHING = "detaching"


IN_FLIGHT = (DeviceState.ATTACHING, DeviceState.DETACHING)


class InventoryError(RuntimeError):
    """The configuration no longer matches persisted attachments; starting would lose one."""


class StoreInUseError(RuntimeError):
    """Another fabric manager holds this state file; two would settle each other's operations."""


@dataclass(frozen=True)
class Use:
    """A node's word that it prepared the device for a claim and has not unprepared it yet."""

    claim: str
    node: str
    since: float


@dataclass(frozen=True)
class DeviceRecord:
    uuid: str
    name: str
    fabric: str
    model: str
    index: int
    attributes: dict[str, Any]
    state: DeviceState
    node: str | None
    op_id: str | None
    state_since: float
    last_error: dict[str, Any] | None
    generation: int


def _record(row: sqlite3.Row) -> DeviceRecord:
    return DeviceRecord(
        uuid=row["uuid"],
        name=row["name"],
        fabric=row["fabric"],
        model=row["model"],
        index=row["idx"],
        attributes=json.loads(row["attributes"]),
        state=DeviceState(row["state"]),
        node=row["node"],
        op_id=row["op_id"],
        state_since=row["state_since"],
        last_error=json.loads(row["last_error"]) if row["last_error"] else None,
        generation=row["generation"],
    )


class Store:
    """Device table in one SQLite file. Not thread-safe by design: the service uses it from its event loop only."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock_fd: int | None = None
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = self._lock(self.path + ".lock")
        try:
            self._db = self._open()
        except BaseException:
            self._unlock()
            raise

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: autocommit, each statement is its own transaction unless we BEGIN explicitly.
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
        try:
            db.row_factory = sqlite3.Row
            # WAL + synchronous=NORMAL survives a killed process (what "restart" means here); only a power loss
            # could drop the last commits, which a fake need not survive.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if version is None:
                db.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(version["value"]) != SCHEMA_VERSION:
                raise InventoryError(f"{self.path}: schema version {version['value']}, expected {SCHEMA_VERSION}")
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _lock(lock_path: str) -> int:
        # flock is released by the kernel when the process dies, so a crash never leaves a stale lock behind.
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreInUseError(f"{lock_path} is held by another fabric manager (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def close(self) -> None:
        self._db.close()
        self._unlock()

    def ping(self) -> None:
        self._db.execute("SELECT 1").fetchone()

    # --- startup -------------------------------------------------------------------------------------------

    def settle_interrupted(self, now: float | None = None) -> list[DeviceRecord]:
        """End operations a previous process left in flight; returns the devices as they were before.

        Both directions settle to ``free``: an interrupted attach is rolled back (the caller never got a 200 and
        retries; attach is idempotent), an interrupted detach is completed (detach is only asked for once the
        device is no longer used, so freeing it is the safe direction).
        """
        now = time.time() if now is None else now
        before = self.find(states=IN_FLIGHT)
        for record in before:
            operation = "attach" if record.state is DeviceState.ATTACHING else "detach"
            verb = "rolled back" if operation == "attach" else "completed"
            error = {
                "operation": operation,
                "reason": "Interrupted",
                "message": f"{operation} to {record.node} was in flight when the fabric manager stopped; {verb}",
                "at": now,
            }
            self._transition(record.uuid, record.state, DeviceState.FREE, node=None, op_id=None, now=now, error=error)
        return before

    def sync_inventory(self, devices: Iterable[DeviceSpec], fabrics: Mapping[str, Iterable[str]]) -> None:
        """Make the table match the configured devices without dropping any attachment.

        New devices are added free; descriptive fields follow the config; free devices no longer configured are
        removed. A configuration that would orphan an attachment (device removed, or its node no longer on its
        fabric) is refused instead of silently detaching it.
        """
        devices = list(devices)
        wanted = {device.uuid: device for device in devices}
        reachable = {fabric: set(nodes) for fabric, nodes in fabrics.items()}
        self._db.execute("BEGIN IMMEDIATE")
        try:
            problems: list[str] = []
            for record in self.find():
                spec = wanted.get(record.uuid)
                if record.state is DeviceState.FREE:
                    if spec is None:
                        self._db.execute("DELETE FROM devices WHERE uuid = ?", (record.uuid,))
                    continue
                if spec is None:
                    problems.append(
                        f"{record.name} ({record.uuid}) is {record.state} to {record.node} but not configured"
                    )
                elif record.node not in reachable.get(spec.fabric, set()):
                    problems.append(f"{record.name} is {record.state} to {record.node}, no longer on {spec.fabric}")
            if problems:
                raise InventoryError("configuration would orphan attachments: " + "; ".join(problems))
            now = time.time()
            for spec in devices:
                self._db.execute(
                    """
                    INSERT INTO devices (uuid, name, fabric, model, idx, attributes, state, state_since)
                    VALUES (?, ?, ?, ?, ?, ?, 'free', ?)
                    ON CONFLICT (uuid) DO UPDATE SET
                        name = excluded.name, fabric = excluded.fabric, model = excluded.model,
                        idx = excluded.idx, attributes = excluded.attributes
                    """,
                    (spec.uuid, spec.name, spec.fabric, spec.model, spec.index, json.dumps(spec.attributes), now),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    # --- reads ---------------------------------------------------------------------------------------------

    def get(self, device_uuid: str) -> DeviceRecord | None:
        row = self._db.execute("SELECT * FROM devices WHERE uuid = ?", (device_uuid,)).fetchone()
        return _record(row) if row else None

    def find(
        self,
        *,
        fabric: str | None = None,
        model: str | None = None,
        node: str | None = None,
        states: Iterable[DeviceState] | None = None,
    ) -> list[DeviceRecord]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("fabric", fabric), ("model", model), ("node", node)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if states is not None:
            wanted = [str(state) for state in states]
            clauses.append(f"state IN ({', '.join('?' for _ in wanted)})")
            params.extend(wanted)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._db.execute(f"SELECT * FROM devices {where} ORDER BY fabric, model, idx", params).fetchall()
        return [_record(row) for row in rows]

    def counts(self) -> list[tuple[str, str, str, int]]:
        """(fabric, model, state, devices) for every combination present: the free counts without reading every
        device (the probe asks for them ten times a second)."""
        rows = self._db.execute("SELECT fabric, model, state, COUNT(*) FROM devices GROUP BY fabric, model, state")
        return [(row[0], row[1], row[2], int(row[3])) for row in rows.fetchall()]

    # --- uses (the nodes' prepared claims) -----------------------------------------------------------------

    def uses(self, device_uuid: str | None = None) -> dict[str, list[Use]]:
        """uuid -> the claims a node prepared the device for (every device with a use, or just `device_uuid`)."""
        sql, params = "SELECT * FROM uses ORDER BY since, claim", ()
        if device_uuid is not None:
            sql, params = "SELECT * FROM uses WHERE uuid = ? ORDER BY since, claim", (device_uuid,)
        out: dict[str, list[Use]] = {}
        for row in self._db.execute(sql, params).fetchall():
            out.setdefault(row["uuid"], []).append(Use(row["claim"], row["node"], row["since"]))
        return out

    def add_use(self, device_uuid: str, claim: str, node: str, now: float) -> bool:
        """Mark the device used by `claim` on `node`; False unless it is attached to that node (nothing marked)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute("SELECT state, node FROM devices WHERE uuid = ?", (device_uuid,)).fetchone()
            ok = row is not None and row["state"] == str(DeviceState.ATTACHED) and row["node"] == node
            if ok:
                self._db.execute(
                    "INSERT INTO uses (uuid, claim, node, since) VALUES (?, ?, ?, ?) ON CONFLICT (uuid, claim) DO "
                    "UPDATE SET node = excluded.node",
                    (device_uuid, claim, node, now),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return ok

    def remove_uses(self, claim: str) -> int:
        """Unmark every device used by `claim` (NodeUnprepareResources); how many were marked."""
        return self._db.execute("DELETE FROM uses WHERE claim = ?", (claim,)).rowcount

    # --- transitions ---------------------------------------------------------------------------------------

    def _transition(
        self,
        device_uuid: str,
        expected: DeviceState,
        new: DeviceState,
        *,
        node: str | None,
        op_id: str | None,
        now: float,
        error: dict[str, Any] | None = None,
        keep_error: bool = False,
        expected_op: str | None = None,
        expected_node: str | None = None,
    ) -> bool:
        """One conditional UPDATE; False when the device was not in the expected state (someone else won)."""
        sql = (
            "UPDATE devices SET state = ?, node = ?, op_id = ?, state_since = ?, generation = generation + 1"
            + ("" if keep_error else ", last_error = ?")
            + " WHERE uuid = ? AND state = ?"
        )
        params: list[Any] = [str(new), node, op_id, now]
        if not keep_error:
            params.append(json.dumps(error) if error else None)
        params += [device_uuid, str(expected)]
        if expected_op is not None:
            sql += " AND op_id = ?"
            params.append(expected_op)
        if expected_node is not None:
            sql += " AND node = ?"
            params.append(expected_node)
        changed = self._db.execute(sql, params).rowcount == 1
        if changed and new is DeviceState.FREE:  # no node uses a device attached nowhere
            self._db.execute("DELETE FROM uses WHERE uuid = ?", (device_uuid,))
        return changed

    def begin_attach(self, device_uuid: str, node: str, op_id: str, now: float) -> bool:
        # The last error stays visible while the next attempt runs; it is replaced by the attempt's outcome.
        return self._transition(
            device_uuid, DeviceState.FREE, DeviceState.ATTACHING, node=node, op_id=op_id, now=now, keep_error=True
        )

    def finish_attach(self, device_uuid: str, op_id: str, node: str, now: float) -> bool:
        return self._transition(
            device_uuid, DeviceState.ATTACHING, DeviceState.ATTACHED, node=node, op_id=None, now=now, expected_op=op_id
        )

    def fail_attach(self, device_uuid: str, op_id: str, error: dict[str, Any], now: float) -> bool:
        return self._transition(
            device_uuid,
            DeviceState.ATTACHING,
            DeviceState.FREE,
            node=None,
            op_id=None,
            now=now,
            error=error,
            expected_op=op_id,
        )

    def begin_detach(self, device_uuid: str, node: str, op_id: str, now: float) -> bool:
        return self._transition(
            device_uuid,
            DeviceState.ATTACHED,
            DeviceState.DETACHING,
            node=node,
            op_id=op_id,
            now=now,
            keep_error=True,
            expected_node=node,
        )

    def finish_detach(self, device_uuid: str, op_id: str, now: float, error: dict[str, Any] | None = None) -> bool:
        return self._transition(
            device_uuid,
            DeviceState.DETACHING,
            DeviceState.FREE,
            node=None,
            op_id=None,
            now=now,
            error=error,
            expected_op=op_id,
        )

    def fail_detach(self, device_uuid: str, op_id: str, node: str, error: dict[str, Any], now: float) -> bool:
        # A failed detach leaves the device where it was: still attached to its node.
        return self._transition(
            device_uuid,
            DeviceState.DETACHING,
            DeviceState.ATTACHED,
            node=node,
            op_id=None,
            now=now,
            error=error,
            expected_op=op_id,
        )
