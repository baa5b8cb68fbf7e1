"""The tables, the statements over them, and the versioned creation of the schema on first use.

``dsh_schema(version)`` holds one row: the version of these tables. ``dsh_sessions`` has one row
per session: its meta and listing columns, the number of stored events, and the owner epoch with
the owner's identity. ``dsh_events`` has one row per event, keyed ``(session_id, seq)``; ``data``
is of type ``json`` (kept exactly as written, so every value round-trips; ``jsonb`` would
renumber ``1.0`` as ``1`` and reorder keys), and still open to ``->`` / ``->>`` queries.
``dsh_damaged`` keeps the rows ``repair`` cut from a damaged log, keyed ``(session_id, epoch,
seq)``; it is created by the first repair (a version-1 schema works with or without it).

The schema is created under a transaction-scoped advisory lock, so two processes starting at
once on an empty database neither race nor fail.
"""

from __future__ import annotations

import attrs
import psycopg
from psycopg import sql

from ._errors import SessionFormatError
from ._version import LOCK_SEED, SCHEMA_VERSION

__all__ = ["LOCK_SEED", "SCHEMA_VERSION", "Statements", "ensure_schema", "schema_lock"]



def _tables(schema: sql.Identifier) -> list[sql.Composed]:
    return [
        sql.SQL("CREATE TABLE {}.dsh_schema (version integer NOT NULL, created timestamptz NOT NULL DEFAULT now())").format(schema),
        sql.SQL(
            "CREATE TABLE {}.dsh_sessions ("
            " id text PRIMARY KEY,"
            " created timestamptz NOT NULL,"
            " modified timestamptz NOT NULL,"
            " meta json NOT NULL,"
            " cwd text,"
            " parent_id text,"
            " seed_length integer NOT NULL,"
            " events bigint NOT NULL,"
            " turns integer NOT NULL DEFAULT 0,"
            " title text,"
            " epoch bigint NOT NULL,"
            " owner_host text,"
            " owner_pid integer,"
            " owner_since timestamptz)"
        ).format(schema),
        sql.SQL(
            "CREATE TABLE {}.dsh_events ("
            " session_id text NOT NULL,"
            " seq bigint NOT NULL,"
            " type text NOT NULL,"
            " time double precision NOT NULL,"
            " data json NOT NULL,"
            " PRIMARY KEY (session_id, seq))"
        ).format(schema),
        sql.SQL("CREATE INDEX ON {}.dsh_sessions (parent_id)").format(schema),
        sql.SQL("INSERT INTO {}.dsh_schema (version) VALUES ({})").format(schema, sql.Literal(SCHEMA_VERSION)),
    ]


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]], schema: str, target: str) -> None:
    """Create the tables in ``schema`` if they are missing, or check their version.

    Every DDL of the schema runs under the transaction-scoped advisory lock ``schema_lock``.

    :raises SessionFormatError: the schema holds another version (naming both).
    """
    ident = sql.Identifier(schema)
    with conn.transaction():
        schema_lock(conn, schema)
        found = conn.execute("SELECT to_regclass(format('%%I.dsh_schema', %s::text))", (schema,)).fetchone()
        if found is not None and found[0] is not None:
            row = conn.execute(sql.SQL("SELECT max(version) FROM {}.dsh_schema").format(ident)).fetchone()
            version = None if row is None else row[0]
            if version != SCHEMA_VERSION:
                msg = (
                    f"{target}: schema {schema!r} holds dsh session tables of version {version}, and this "
                    f"dsh-persistence-postgres uses version {SCHEMA_VERSION}; use the dsh version that "
                    f"created them, or point plugins.persistence-postgres.schema at another schema"
                )
                raise SessionFormatError(msg, version=version, expected=SCHEMA_VERSION)
            return
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
        for statement in _tables(ident):
            conn.execute(statement)


def schema_lock(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """Take the schema's DDL lock until the transaction ends (two processes never race on DDL)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))", (f"schema/{schema}", LOCK_SEED))


@attrs.frozen
class Statements:
    """The statements of one schema, composed once."""

    schema: str

    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=sql.Identifier(self.schema))

    @property
    def lock_key(self) -> str:
        """The prefix of this schema's session lock keys."""
        return f"session/{self.schema}/"

    def append(self, *, durable: bool = True) -> sql.Composed:
        """The fenced write as one statement: the fence, then the batch's rows, only if the fence matched.

        ``%(batch)s`` is one text, a line per event: the type as a JSON string, a tab, the time, a
        tab, the data as JSON (``Batch``). Neither JSON text holds a raw tab or newline, and the
        data goes into the ``json`` column as exactly that text. One statement is one transaction
        in autocommit: one round trip, one commit. It inserts no row when the fence does not match
        (then the UPDATE changed nothing either).

        Not ``durable``: the commit does not wait for the WAL to reach the disk (``synchronous_commit``
        off for this transaction only, set by the fence when it matches). The next durable commit,
        or ``sync_point``, waits for the WAL up to itself, and so for this one too.
        """
        relaxed = "" if durable else " AND set_config('synchronous_commit', 'off', true) IS NOT NULL"
        return self._q(
            "WITH fence AS ("
            " UPDATE {s}.dsh_sessions SET events = %(end)s, modified = now(),"
            " turns = turns + %(turns)s, title = COALESCE(title, %(title)s)"
            " WHERE id = %(id)s AND epoch = %(epoch)s AND events = %(first)s" + relaxed + " RETURNING id)"
            " INSERT INTO {s}.dsh_events (session_id, seq, type, time, data)"
            " SELECT fence.id, %(first)s::bigint + r.ord - 1, split_part(r.line, E'\\t', 1)::json #>> '{{}}',"
            " split_part(r.line, E'\\t', 2)::float8, split_part(r.line, E'\\t', 3)::json"
            " FROM fence, unnest(string_to_array(%(batch)s::text, E'\\n')) WITH ORDINALITY AS r (line, ord)"
        )

    def state(self) -> sql.Composed:
        return self._q("SELECT epoch, events, owner_host, owner_pid FROM {s}.dsh_sessions WHERE id = %s")

    def holder(self) -> sql.Composed:
        return self._q("SELECT owner_host, owner_pid FROM {s}.dsh_sessions WHERE id = %s")

    def claim(self) -> sql.Composed:
        return self._q(
            "UPDATE {s}.dsh_sessions SET epoch = epoch + 1, owner_host = %s, owner_pid = %s,"
            " owner_since = now() WHERE id = %s RETURNING epoch, events, title IS NOT NULL"
        )

    def lock_row(self) -> sql.Composed:
        return self._q("SELECT events FROM {s}.dsh_sessions WHERE id = %s FOR UPDATE")

    def insert_session(self) -> sql.Composed:
        return self._q(
            "INSERT INTO {s}.dsh_sessions (id, created, modified, meta, cwd, parent_id, seed_length,"
            " events, epoch, owner_host, owner_pid, owner_since)"
            " VALUES (%(id)s, to_timestamp(%(created)s), now(), %(meta)s::json, %(cwd)s, %(parent_id)s,"
            " %(seed_length)s, 0, 1, %(host)s, %(pid)s, now())"
        )

    def header(self) -> sql.Composed:
        return self._q(
            "SELECT extract(epoch FROM created)::float8, meta::text, events FROM {s}.dsh_sessions WHERE id = %s"
        )

    def events(self) -> sql.Composed:
        return self._q(
            "SELECT seq, type, time, data::text FROM {s}.dsh_events WHERE session_id = %s ORDER BY seq"
        )

    def event_at(self) -> sql.Composed:
        return self._q(
            "SELECT seq, type, time, data::text FROM {s}.dsh_events WHERE session_id = %s AND seq = %s"
        )

    def exists(self) -> sql.Composed:
        return self._q("SELECT EXISTS (SELECT 1 FROM {s}.dsh_sessions WHERE id = %s)")

    def listing(self) -> sql.Composed:
        return self._q(
            "SELECT id, extract(epoch FROM created)::float8, extract(epoch FROM modified)::float8, cwd,"
            " parent_id, seed_length, events, turns, title FROM {s}.dsh_sessions ORDER BY created, id"
        )

    # ---------------------------------------------------------------- the explicit repair

    def damaged_exists(self) -> sql.Composed:
        return self._q("SELECT to_regclass(format('%%I.dsh_damaged', %s::text)) IS NOT NULL")

    def create_damaged(self) -> sql.Composed:
        """The table ``repair`` moves the rows it cuts to (created on its first use; optional in v1)."""
        return self._q(
            "CREATE TABLE IF NOT EXISTS {s}.dsh_damaged ("
            " session_id text NOT NULL,"
            " epoch bigint NOT NULL,"
            " seq bigint NOT NULL,"
            " type text NOT NULL,"
            " time double precision NOT NULL,"
            " data text NOT NULL,"
            " cut timestamptz NOT NULL DEFAULT now(),"
            " problem text,"
            " PRIMARY KEY (session_id, epoch, seq))"
        )

    def keep_damaged(self) -> sql.Composed:
        return self._q(
            "INSERT INTO {s}.dsh_damaged (session_id, epoch, seq, type, time, data, problem)"
            " SELECT session_id, %(epoch)s, seq, type, time, data::text, %(problem)s FROM {s}.dsh_events"
            " WHERE session_id = %(id)s AND seq >= %(keep)s"
        )

    def cut_events(self) -> sql.Composed:
        return self._q("DELETE FROM {s}.dsh_events WHERE session_id = %(id)s AND seq >= %(keep)s")

    def set_count(self) -> sql.Composed:
        return self._q(
            "UPDATE {s}.dsh_sessions SET events = %(keep)s, turns = %(turns)s, title = %(title)s,"
            " modified = now() WHERE id = %(id)s"
        )

    def delete_damaged(self) -> sql.Composed:
        return self._q("DELETE FROM {s}.dsh_damaged WHERE session_id = %s")

    def delete_events(self) -> sql.Composed:
        return self._q("DELETE FROM {s}.dsh_events WHERE session_id = %s")

    def delete_session(self) -> sql.Composed:
        return self._q("DELETE FROM {s}.dsh_sessions WHERE id = %s RETURNING 1")
