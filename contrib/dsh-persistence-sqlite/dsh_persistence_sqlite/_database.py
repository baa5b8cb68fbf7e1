"""The SQL of the store: every statement, as blocking calls (the store runs them in worker threads).

One *writer* connection per store carries every write, under a mutex (SQLite has one writer at a
time anyway; other processes queue on its lock for up to ``busy_timeout``). Reads open a connection
of their own for the call, so a long load never holds up a write (WAL: readers see the last commit).

Every write is fenced: it commits only if the session's stored ``epoch`` is the writer's and its
stored count equals the write's first seq (one ``UPDATE ... WHERE``), otherwise nothing is written
and the caller learns why (``SessionFencedError``: another owner took over).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from itertools import chain
from pathlib import Path
from typing import Any, Final

import attrs

from dsh_core.persistence import SessionFencedError, SessionNotFoundError, SessionWriteError

from ._rows import Row
from ._schema import connect, ensure_schema

__all__ = ["Claim", "Database", "RepairDone", "StoredRows", "holder_text", "insert_events", "not_found"]

#: rows per ``INSERT`` statement, largest first: 100 rows are 500 parameters, under SQLite's lowest limit (999)
_INSERT_SIZES: Final = (100, 10, 1)
_INSERT: Final = {
    size: "INSERT INTO dsh_events (session_id, seq, type, time, data) VALUES "
    + ", ".join(["(?, ?, ?, ?, ?)"] * size)
    for size in _INSERT_SIZES
}


@attrs.frozen
class Claim:
    """The session as this store took it over: its new owner epoch, its stored count, whether it has a title."""

    epoch: int
    count: int
    titled: bool


@attrs.frozen
class StoredRows:
    """A session's row and its event rows ``(seq, type, time, data)``, read in one transaction."""

    created: float
    meta: str
    rows: list[tuple[Any, ...]]


@attrs.frozen
class RepairDone:
    """What ``Database.repair`` did (``seq`` is ``None`` when nothing was cut)."""

    epoch: int
    seq: int | None
    dropped: int
    events: int
    problem: str | None


def holder_text(host: str | None, pid: int | None) -> str:
    """The holder as messages name it: ``process N on host H``, and when it is this process, say so."""
    if pid is None:
        return "another process"
    text = f"process {pid} on host {host}" if host else f"process {pid}"
    if pid == os.getpid() and host in (None, socket.gethostname()):
        text += " (this process: another harness, or a load() not yet resumed)"
    return text


def not_found(session_id: str, path: Path) -> SessionNotFoundError:
    msg = f"no stored session {session_id!r} in {path}; list them with session_persistence.list()"
    return SessionNotFoundError(msg, session_id=session_id, path=path)


def insert_events(conn: sqlite3.Connection, rows: Sequence[Row]) -> None:
    """Insert ``rows`` into ``dsh_events``, many to a statement: a third less CPU per row than
    ``executemany`` of one row each (the statements' text is fixed, so they stay prepared)."""
    start = 0
    for size in _INSERT_SIZES:
        statement = _INSERT[size]
        while len(rows) - start >= size:
            conn.execute(statement, list(chain.from_iterable(rows[start : start + size])))
            start += size


class Database:
    """The session database at ``path`` (see the module docstring)."""

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self._writer: sqlite3.Connection | None = None
        self._mutex = threading.Lock()
        self._durable = False

    # ------------------------------------------------------------------ connections

    def open(self) -> None:
        """Create the folder and the schema, or check the version. :raises SessionFormatError:"""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path, busy_timeout=self.busy_timeout)
        try:
            ensure_schema(conn, self.path)
        except BaseException:
            conn.close()
            raise
        self._writer = conn

    def close(self) -> None:
        with self._mutex:
            conn, self._writer = self._writer, None
            if conn is not None:
                conn.close()

    @contextmanager
    def _writing(self, *, durable: bool) -> Iterator[sqlite3.Connection]:
        """The writer connection inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on an error)."""
        with self._mutex:
            conn = self._writer
            if conn is None:
                msg = f"{self.path}: the session store has stopped"
                raise sqlite3.ProgrammingError(msg)
            if durable != self._durable:  # a connection setting: outside any transaction
                conn.execute("PRAGMA synchronous = FULL" if durable else "PRAGMA synchronous = NORMAL")
                self._durable = durable
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection of this call's own, inside one read transaction (a consistent snapshot)."""
        with closing(connect(self.path, busy_timeout=self.busy_timeout)) as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # ------------------------------------------------------------------ reads

    def exists(self, session_id: str) -> bool:
        with self._reading() as conn:
            return conn.execute("SELECT 1 FROM dsh_sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def holder(self, session_id: str) -> tuple[str | None, int | None]:
        """The last owner of ``session_id`` as it recorded itself (``(None, None)`` if unknown)."""
        with self._reading() as conn:
            row = conn.execute("SELECT holder_host, holder_pid FROM dsh_sessions WHERE id = ?", (session_id,)).fetchone()
        return (row[0], row[1]) if row is not None else (None, None)

    def read(self, session_id: str) -> StoredRows | None:
        with self._reading() as conn:
            head = conn.execute("SELECT created, meta FROM dsh_sessions WHERE id = ?", (session_id,)).fetchone()
            if head is None:
                return None
            rows = conn.execute(
                "SELECT seq, type, time, data FROM dsh_events WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        return StoredRows(head[0], head[1], rows)

    def last_row(self, session_id: str, count: int) -> tuple[Any, ...] | None:
        """The stored event row ``count - 1`` (``None`` for an empty log)."""
        if count == 0:
            return None
        with self._reading() as conn:
            row: tuple[Any, ...] | None = conn.execute(
                "SELECT seq, type, time, data FROM dsh_events WHERE session_id = ? AND seq = ?",
                (session_id, count - 1),
            ).fetchone()
        return row

    def listing(self) -> list[tuple[Any, ...]]:
        with self._reading() as conn:
            return conn.execute(
                "SELECT id, created, modified, cwd, parent_id, seed_length, events, turns, title "
                "FROM dsh_sessions ORDER BY created, id"
            ).fetchall()

    # ------------------------------------------------------------------ ownership

    def claim(self, session_id: str) -> Claim | None:
        """Take a stored session over: a new epoch, and this process as its holder (``None``: not stored)."""
        with self._writing(durable=True) as conn:
            row = conn.execute(
                "UPDATE dsh_sessions SET epoch = epoch + 1, holder_host = ?, holder_pid = ? WHERE id = ? "
                "RETURNING epoch, events, title IS NOT NULL",
                (self.host, self.pid, session_id),
            ).fetchone()
        return None if row is None else Claim(row[0], row[1], bool(row[2]))

    def create(
        self,
        session_id: str,
        *,
        created: float,
        meta: str,
        cwd: str | None,
        parent_id: str | None,
        seed_length: int,
        rows: Sequence[Row],
        turns: int,
        title: str | None,
    ) -> Claim | int:
        """Store a new session with its first ``rows``, owned by this process at epoch 1.

        Returns the ``Claim``, or the stored count when a session with this id is already stored (the
        caller checks whether the live session continues it, then ``claim``s it).
        """
        with self._writing(durable=True) as conn:
            stored = conn.execute("SELECT events FROM dsh_sessions WHERE id = ?", (session_id,)).fetchone()
            if stored is not None:
                count: int = stored[0]
                return count
            conn.execute(
                "INSERT INTO dsh_sessions (id, created, modified, meta, cwd, parent_id, seed_length, events, "
                "turns, title, epoch, holder_host, holder_pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
                (session_id, created, created, meta, cwd, parent_id, seed_length, len(rows), turns, title,
                 self.host, self.pid),
            )
            insert_events(conn, rows)
        return Claim(1, len(rows), title is not None)

    # ------------------------------------------------------------------ writes

    def append(
        self, session_id: str, epoch: int, first: int, rows: Sequence[Row], *, turns: int, title: str | None,
        durable: bool,
    ) -> None:
        """Append ``rows`` (seqs from ``first``), fenced by ``epoch``; ``durable``: fsynced before it returns.

        :raises SessionFencedError: another owner took the session over (or it was deleted).
        :raises SessionWriteError: the stored log does not end where ``first`` says (nothing written).
        :raises sqlite3.Error: the database failed (busy past the timeout, I/O, full): retry later.
        """
        with self._writing(durable=durable) as conn:
            done = conn.execute(
                "UPDATE dsh_sessions SET events = events + ?, turns = turns + ?, title = coalesce(title, ?), "
                "modified = ? WHERE id = ? AND epoch = ? AND events = ?",
                (len(rows), turns, title, time.time(), session_id, epoch, first),
            ).rowcount
            if done != 1:
                self._refuse(conn, session_id, epoch, first)
            insert_events(conn, rows)

    def sync_point(self, session_id: str, epoch: int) -> None:
        """Make every commit so far durable: a fenced one-row write under ``synchronous = FULL``, whose
        fsync of the WAL covers the frames the earlier (unsynced) commits put there."""
        with self._writing(durable=True) as conn:
            done = conn.execute(
                "UPDATE dsh_sessions SET modified = ? WHERE id = ? AND epoch = ?", (time.time(), session_id, epoch)
            ).rowcount
            if done != 1:
                self._refuse(conn, session_id, epoch, None)

    def _refuse(self, conn: sqlite3.Connection, session_id: str, epoch: int, first: int | None) -> None:
        row = conn.execute(
            "SELECT epoch, events, holder_host, holder_pid FROM dsh_sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None or row[0] != epoch:
            host, pid = (row[2], row[3]) if row is not None else (None, None)
            now = "it was deleted" if row is None else f"it is now held by {holder_text(host, pid)} at epoch {row[0]}"
            msg = (
                f"session {session_id!r} in {self.path}: this process lost it (its owner epoch {epoch} is stale: "
                f"{now}); nothing more is written here. Resume it where it lives now"
            )
            raise SessionFencedError(msg, session_id=session_id, host=host, pid=pid, epoch=epoch)
        msg = (
            f"session {session_id!r} in {self.path}: the stored log holds {row[1]} events, but this write "
            f"starts at event {first}; nothing was written"
        )
        raise SessionWriteError(msg, session_id=session_id, path=self.path)

    def delete(self, session_id: str) -> bool:
        """Remove the session's row and every row of its events and cut events; whether it was stored."""
        with self._writing(durable=True) as conn:
            gone = conn.execute("DELETE FROM dsh_sessions WHERE id = ?", (session_id,)).rowcount
            conn.execute("DELETE FROM dsh_events WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM dsh_damaged WHERE session_id = ?", (session_id,))
        return gone == 1

    def cut(self, session_id: str, seq: int, *, turns: int, title: str | None) -> tuple[int, int]:
        """Move the event rows from ``seq`` on to ``dsh_damaged`` under a new epoch; (epoch, rows moved)."""
        with self._writing(durable=True) as conn:
            row = conn.execute(
                "UPDATE dsh_sessions SET epoch = epoch + 1, events = ?, turns = ?, title = ?, modified = ?, "
                "holder_host = ?, holder_pid = ? WHERE id = ? RETURNING epoch",
                (seq, turns, title, time.time(), self.host, self.pid, session_id),
            ).fetchone()
            epoch: int = row[0]
            conn.execute(
                "INSERT INTO dsh_damaged (session_id, epoch, seq, type, time, data) "
                "SELECT session_id, ?, seq, type, time, data FROM dsh_events WHERE session_id = ? AND seq >= ?",
                (epoch, session_id, seq),
            )
            moved = conn.execute("DELETE FROM dsh_events WHERE session_id = ? AND seq >= ?", (session_id, seq)).rowcount
        return epoch, moved
