"""The three backends under the persistence contract, behind one small interface for the tests."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.to_thread
import dsh_persistence_jsonl
import dsh_persistence_postgres
import dsh_persistence_sqlite
import psycopg
from dsh_persistence_postgres._schema import LOCK_SEED, Statements
from dsh_persistence_sqlite._owners import lock_offset
from psycopg import sql

import dsh_core.persistence
from dsh_core import AgentOptions, Context, Harness, SessionEvent
from dsh_core.testing import ScriptedModel

MODEL = AgentOptions(model="scripted/test")


class Backend:
    """A persistence plugin under test: how to start it, and how to look at what it stored."""

    name: str
    #: the plugin's package: its error classes are looked up there (``backend.errors.SessionInUseError``)
    errors: ModuleType
    #: ``module:Class`` of the plugin, for a subprocess
    plugin_path: str
    #: the batch delay the tests use when they do not care
    default_delay: float = 0.1

    def table(self, **overrides: Any) -> dict[str, Any]:
        """The plugin's config table."""
        raise NotImplementedError

    def plugin(self) -> object:
        raise NotImplementedError

    def make(self, directory: Path) -> tuple[object, dict[str, Any]]:
        """``check_session_store``'s ``make``: a plugin and its table for a fresh store in ``directory``."""
        raise NotImplementedError

    def config(self, *, batch_delay: float | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        delay = self.default_delay if batch_delay is None else batch_delay
        return {"plugins": {self.name: self.table(batch_delay=delay), **(extra or {})}}

    @asynccontextmanager
    async def harness(
        self,
        model: ScriptedModel | None = None,
        *,
        batch_delay: float | None = None,
        plugins: tuple[object, ...] = (),
        extra: dict[str, Any] | None = None,
    ) -> AsyncIterator[Context]:
        """A Harness with this backend's plugin (autoload off); a ScriptedModel if given."""
        config = self.config(batch_delay=batch_delay, extra=extra)
        async with Harness(config=config, plugins=[self.plugin(), *plugins], autoload=False) as ctx:
            if model is not None:
                ctx.llm.register_adapter(model.provider, model)
            yield ctx

    def stored(self, session_id: str) -> list[SessionEvent]:
        """The events stored for ``session_id``, read without the plugin (plain ``json``)."""
        raise NotImplementedError

    def raw(self, session_id: str) -> list[object]:
        """The stored form of each event of ``session_id``, as the backend keeps it (bytes, row text).

        For "appended, never rewritten": a prefix of these stays exactly the same.
        """
        raise NotImplementedError

    def damage(self, session_id: str, seq: int, event_type: str, data: dict[str, Any]) -> None:
        """Overwrite the stored event ``seq`` with one of ``event_type`` and ``data``, bypassing every check."""
        raise NotImplementedError

    def backed_up(self, session_id: str, report: Any) -> list[object]:
        """The stored form (as ``raw``) of the events ``repair`` cut and kept aside, as ``report`` names them."""
        raise NotImplementedError

    def is_empty(self) -> bool:
        """Nothing at all is stored."""
        raise NotImplementedError

    async def wait_released(self, session_id: str) -> None:
        """Return once no process holds ``session_id`` (waiting on the lock itself, not polling)."""


class JsonlBackend(Backend):
    name = "persistence-jsonl"
    errors = dsh_persistence_jsonl
    plugin_path = "dsh_persistence_jsonl:PersistencePlugin"

    def __init__(self, root: Path) -> None:
        self.root = root

    def table(self, **overrides: Any) -> dict[str, Any]:
        return {"root": str(self.root), **overrides}

    def plugin(self) -> object:
        return dsh_persistence_jsonl.PersistencePlugin()

    def make(self, directory: Path) -> tuple[object, dict[str, Any]]:
        return self.plugin(), {"root": str(directory / "sessions"), "batch_delay": self.default_delay}

    def path(self, session_id: str) -> Path:
        return self.root / dsh_persistence_jsonl.escape_id(session_id) / "session.jsonl"

    def stored(self, session_id: str) -> list[SessionEvent]:
        return [SessionEvent.from_json(json.loads(line)) for line in self.raw(session_id)]

    def raw(self, session_id: str) -> list[object]:
        """The complete event lines of the file, byte for byte (the header and a torn tail left out)."""
        return list(self.path(session_id).read_bytes().split(b"\n")[1:-1])

    def damage(self, session_id: str, seq: int, event_type: str, data: dict[str, Any]) -> None:
        path = self.path(session_id)
        lines = path.read_bytes().split(b"\n")
        time = json.loads(lines[seq + 1])["time"]
        lines[seq + 1] = json.dumps({"type": event_type, "seq": seq, "time": time, "data": data}).encode()
        path.write_bytes(b"\n".join(lines))

    def backed_up(self, session_id: str, report: Any) -> list[object]:
        backup: Path = report.backup
        assert backup.parent == self.path(session_id).parent
        return list(backup.read_bytes().split(b"\n")[1:-1][report.seq :])

    def is_empty(self) -> bool:
        return not self.root.exists() or not any(self.root.iterdir())


class PostgresBackend(Backend):
    name = "persistence-postgres"
    errors = dsh_persistence_postgres
    plugin_path = "dsh_persistence_postgres:PersistencePlugin"
    default_delay = 0.05

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = schema

    def table(self, **overrides: Any) -> dict[str, Any]:
        return {"dsn": self.dsn, "schema": self.schema, **overrides}

    def plugin(self) -> object:
        return dsh_persistence_postgres.PersistencePlugin()

    def make(self, directory: Path) -> tuple[object, dict[str, Any]]:
        """A schema of its own per store (named from the directory), on the test's server."""
        schema = f"kit_{abs(hash(str(directory))):x}"
        return self.plugin(), {"dsn": self.dsn, "schema": schema, "batch_delay": self.default_delay}

    def query(self, text: str, *args: object) -> list[tuple[Any, ...]]:
        """Run SQL against the test's schema (``{s}`` names it)."""
        statement = sql.SQL(text).format(s=sql.Identifier(self.schema))
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(statement, args)
            return cursor.fetchall() if cursor.description is not None else []

    def stored(self, session_id: str) -> list[SessionEvent]:
        return [
            SessionEvent.from_json({"type": kind, "seq": seq, "time": time, "data": json.loads(data)})
            for seq, kind, time, data in self.rows(session_id)
        ]

    def rows(self, session_id: str) -> list[tuple[Any, ...]]:
        """``(seq, type, time, data text)`` of each stored event row, in seq order."""
        return self.query(
            "SELECT seq, type, time, data::text FROM {s}.dsh_events WHERE session_id = %s ORDER BY seq",
            session_id,
        )

    def raw(self, session_id: str) -> list[object]:
        return list(self.rows(session_id))

    async def wait_released(self, session_id: str) -> None:
        await anyio.to_thread.run_sync(self._wait_released, session_id)

    def _wait_released(self, session_id: str) -> None:
        key = Statements(self.schema).lock_key + session_id
        with psycopg.connect(self.dsn, autocommit=True) as conn:  # a blocking lock waits for the holder's end
            conn.execute("SET statement_timeout = '30s'")
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, %s))", (key, LOCK_SEED))
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, %s))", (key, LOCK_SEED))

    def damage(self, session_id: str, seq: int, event_type: str, data: dict[str, Any]) -> None:
        self.query(
            "UPDATE {s}.dsh_events SET type = %s, data = %s::json WHERE session_id = %s AND seq = %s",
            event_type,
            json.dumps(data),
            session_id,
            seq,
        )

    def backed_up(self, session_id: str, report: Any) -> list[object]:
        assert report.backup == f"{self.schema}.dsh_damaged (session_id = {session_id!r}, epoch = {report.epoch})"
        return list(
            self.query(
                "SELECT seq, type, time, data FROM {s}.dsh_damaged WHERE session_id = %s AND epoch = %s ORDER BY seq",
                session_id,
                report.epoch,
            )
        )

    def is_empty(self) -> bool:
        exists = self.query("SELECT to_regclass(format('%%I.dsh_sessions', %s::text))", self.schema)
        if not exists or exists[0][0] is None:
            return True
        tables = ["dsh_sessions", "dsh_events"]
        if self.query("SELECT to_regclass(format('%%I.dsh_damaged', %s::text))", self.schema)[0][0] is not None:
            tables.append("dsh_damaged")
        union = " UNION ALL ".join(f"SELECT 1 FROM {{s}}.{table}" for table in tables)
        return not self.query(union)


class SqliteBackend(Backend):
    name = "persistence-sqlite"
    #: the core's errors: this backend defines none of its own
    errors = dsh_core.persistence
    plugin_path = "dsh_persistence_sqlite:PersistencePlugin"
    default_delay = 0.05

    def __init__(self, path: Path) -> None:
        self.path = path

    def table(self, **overrides: Any) -> dict[str, Any]:
        return {"path": str(self.path), **overrides}

    def plugin(self) -> object:
        return dsh_persistence_sqlite.PersistencePlugin()

    def make(self, directory: Path) -> tuple[object, dict[str, Any]]:
        return self.plugin(), {"path": str(directory / "sessions.db"), "batch_delay": self.default_delay}

    def query(self, text: str, *args: object) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
            return conn.execute(text, args).fetchall()

    def stored(self, session_id: str) -> list[SessionEvent]:
        return [
            SessionEvent.from_json({"type": kind, "seq": seq, "time": time, "data": json.loads(data)})
            for seq, kind, time, data in self.raw(session_id)  # type: ignore[misc]
        ]

    def raw(self, session_id: str) -> list[object]:
        """``(seq, type, time, data text)`` of each stored event row, in seq order."""
        if not self.path.exists():
            return []
        return list(
            self.query("SELECT seq, type, time, data FROM dsh_events WHERE session_id = ? ORDER BY seq", session_id)
        )

    def damage(self, session_id: str, seq: int, event_type: str, data: dict[str, Any]) -> None:
        self.query(
            "UPDATE dsh_events SET type = ?, data = ? WHERE session_id = ? AND seq = ?",
            event_type,
            json.dumps(data),
            session_id,
            seq,
        )

    def backed_up(self, session_id: str, report: Any) -> list[object]:
        assert "dsh_damaged" in str(report.backup)
        return list(
            self.query("SELECT seq, type, time, data FROM dsh_damaged WHERE session_id = ? ORDER BY seq", session_id)
        )

    def is_empty(self) -> bool:
        if not self.path.exists():
            return True
        tables = ("dsh_sessions", "dsh_events", "dsh_damaged")
        return not any(self.query(f"SELECT 1 FROM {table} LIMIT 1") for table in tables)

    async def wait_released(self, session_id: str) -> None:
        await anyio.to_thread.run_sync(self._wait_released, session_id, abandon_on_cancel=True)

    def _wait_released(self, session_id: str) -> None:
        """Take the session's byte of the owners file, waiting for the holder's end (the kernel's own wait)."""
        flock = struct.Struct("=hh4xqqi4x")
        offset = lock_offset(session_id)
        fd = os.open(f"{self.path}-owners", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, flock.pack(fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
        finally:
            os.close(fd)  # drops the lock
