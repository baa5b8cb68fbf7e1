"""Helpers for the PostgreSQL tests: SQL on the test's schema, and the lock holder's backend."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from dsh_persistence_postgres._schema import LOCK_SEED, Statements
from psycopg import sql

from dsh_core import Context

#: ``async with harness(model=None, batch_delay=0.05, plugins=(), table=None) as ctx``
HarnessFactory = Callable[..., AbstractAsyncContextManager[Context]]


class Database:
    """Plain SQL on one schema of the test server, through a connection of its own."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = schema

    def query(self, text: str, *args: object) -> list[tuple[Any, ...]]:
        statement = sql.SQL(text).format(s=sql.Identifier(self.schema))
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(statement, args)
            return cursor.fetchall() if cursor.description is not None else []

    def lock_holders(self, session_id: str) -> list[int]:
        """The server pids of the connections holding the session's advisory lock."""
        key = Statements(self.schema).lock_key + session_id
        rows = self.query(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
            " AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, %s)",
            key,
            LOCK_SEED,
        )
        return [row[0] for row in rows]

    def cut_lock_connection(self, session_id: str) -> None:
        """End the server connection holding the session's lock, as a network failure would."""
        (pid,) = self.lock_holders(session_id)
        self.query("SELECT pg_terminate_backend(%s, 10000)", pid)
