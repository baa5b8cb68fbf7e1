"""The database file: its tables, its schema version, and how a connection to it is opened.

Tables (other tools may query them; ``dsh_events`` has one row per event, unique on
``(session_id, seq)``):

* ``dsh_schema (version)`` — one row: the version below; a file of another version is refused.
* ``dsh_sessions`` — one row per session: ``id``, ``created``, ``modified``, ``meta`` (the JSON of
  ``SessionMeta``) with ``cwd``, ``parent_id``, ``seed_length`` repeated for listings, the counts
  ``events`` and ``turns``, ``title``, the owner ``epoch`` and the holder (``holder_host``,
  ``holder_pid``) as the last owner recorded itself.
* ``dsh_events (session_id, seq, type, time, data)`` — ``data`` is the event's data as JSON text.
* ``dsh_damaged`` — the rows ``repair`` cut, with the epoch of the repair that cut them.

The schema is created by the first process that opens the file, in one ``BEGIN IMMEDIATE``
transaction, so two processes starting at once do not race. The file is put in WAL mode then (a
setting the file keeps), which lets readers read while one writer writes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from dsh_core.persistence import SessionFormatError

__all__ = ["SCHEMA_VERSION", "connect", "ensure_schema"]

#: the version of the tables this plugin writes and reads
SCHEMA_VERSION: Final = 1

_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS dsh_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS dsh_sessions (
        id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        modified REAL NOT NULL,
        meta TEXT NOT NULL,
        cwd TEXT,
        parent_id TEXT,
        seed_length INTEGER NOT NULL,
        events INTEGER NOT NULL,
        turns INTEGER NOT NULL,
        title TEXT,
        epoch INTEGER NOT NULL,
        holder_host TEXT,
        holder_pid INTEGER
    )""",
    """CREATE TABLE IF NOT EXISTS dsh_events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time REAL NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS dsh_damaged (
        session_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time REAL NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, epoch, seq)
    ) WITHOUT ROWID""",
)


def connect(path: Path, *, busy_timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any thread under a lock.

    ``synchronous=NORMAL``: a commit in WAL mode then writes the WAL without an fsync (it survives the
    process being killed, not a power loss); a durable commit switches to ``FULL`` for itself.
    """
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the tables on first use, or check the file's version.

    :raises SessionFormatError: the file holds another schema version (naming both).
    """
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        msg = f"{path}: cannot put the session database in WAL mode (it stays in {mode!r} mode)"
        raise sqlite3.OperationalError(msg)
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _TABLES:
            conn.execute(statement)
        rows = conn.execute("SELECT version FROM dsh_schema").fetchall()
        if not rows:
            conn.execute("INSERT INTO dsh_schema (version) VALUES (?)", (SCHEMA_VERSION,))
        elif len(rows) != 1 or rows[0][0] != SCHEMA_VERSION:
            found = rows[0][0] if len(rows) == 1 else [row[0] for row in rows]
            msg = (
                f"{path} holds dsh sessions in schema version {found!r}, and this dsh-persistence-sqlite "
                f"uses version {SCHEMA_VERSION}; open it with the dsh version that wrote it, or upgrade "
                f"dsh-harness-persistence-sqlite"
            )
            raise SessionFormatError(msg, version=found, expected=SCHEMA_VERSION, path=path)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
