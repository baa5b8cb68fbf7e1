"""Blocking access to the server, run from worker threads: a pool for queries, one connection for locks.

Ownership is a session-level advisory lock (``pg_try_advisory_lock``) held on one dedicated
connection per store. The server drops it the moment that connection ends: when the process
exits or is killed (the socket closes), or when its host or network dies (TCP keepalives, set on
both ends, bound that to about 15 s). A hung process keeps its connection, so it stays the owner.
Taking a session also bumps its owner epoch in ``dsh_sessions``, and every write is fenced by
that epoch (``append``): an owner that lost its lock without noticing can never write again.

Everything here is synchronous psycopg, called through ``anyio.to_thread``: psycopg's async API
runs on asyncio only, and dsh runs on trio too (see the plugin docs for the measurement).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Collection, Sequence
from typing import Any, Final

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from dsh_core import SessionEvent, SessionMeta

from ._codec import Pending, decode_event, decode_rows, encode_batch, encoded, sound_prefix, summarize
from ._dsn import KEEPALIVES, SERVER_KEEPALIVES, Target
from ._errors import SessionCorruptError, SessionFencedError, SessionNotFoundError, SessionWriteError
from ._schema import LOCK_SEED, Statements, ensure_schema, schema_lock

__all__ = ["Claim", "Database", "Repaired", "Stored"]

logger = logging.getLogger("dsh.persistence_postgres")

#: seconds to wait for a connection (libpq ``connect_timeout``, and the pool's wait for a free one)
CONNECT_TIMEOUT: Final = 10


@attrs.frozen
class Claim:
    """A session this store now owns: its new epoch, its stored events, whether it has a title."""

    epoch: int
    count: int
    titled: bool


@attrs.frozen
class Repaired:
    """What ``repair`` did: the epoch it took, the first seq it cut (``None``: nothing), the rows it
    moved to ``dsh_damaged``, the events kept, and why the first cut event was refused."""

    epoch: int
    seq: int | None
    dropped: int
    events: int
    problem: str | None


@attrs.frozen
class Stored:
    """A stored session as read: its creation time, meta (JSON) and events."""

    created: float
    meta: Any
    events: list[SessionEvent]


def holder_text(host: str | None, pid: int | None) -> str:
    """The holder as messages name it: ``process 123 on host web-1``."""
    if host is None and pid is None:
        return "another process (its host and pid are not recorded yet)"
    mine = host == socket.gethostname() and pid == os.getpid()
    suffix = " (this process: another harness, or a load() not yet resumed)" if mine else ""
    return f"process {pid} on host {host}{suffix}"


class Database:
    """The server, as one store uses it. Every method blocks: call them from a worker thread."""

    def __init__(self, target: Target, schema: str, *, pool_size: int) -> None:
        self.target = target
        self.schema = schema
        self.sql = Statements(schema)
        self._append = self.sql.append()
        self._append_relaxed = self.sql.append(durable=False)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        options = {**KEEPALIVES, "connect_timeout": str(CONNECT_TIMEOUT)}
        self._conninfo = target.with_options(options)
        self._pool = ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs={"autocommit": True},
            timeout=CONNECT_TIMEOUT,
            name="dsh-persistence-postgres",
        )
        self._lock_conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._lock_mutex = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Connect, create or check the schema, and fill the pool.

        :raises psycopg.Error: the server cannot be reached or refuses us.
        :raises SessionFormatError: the schema holds another version of the tables.
        """
        with self._lock_mutex:
            conn = self._connect_lock()
            ensure_schema(conn, self.schema, self.target.name)
        self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)

    def close(self) -> None:
        """Close the pool and the lock connection (which drops every lock this store holds)."""
        with self._lock_mutex:
            conn, self._lock_conn = self._lock_conn, None
            if conn is not None:
                conn.close()
        self._pool.close()

    def _connect_lock(self) -> psycopg.Connection[tuple[Any, ...]]:
        conn = psycopg.connect(
            self._conninfo, autocommit=True, application_name=f"dsh host={self.host} pid={self.pid}"[:63]
        )
        for name, value in SERVER_KEEPALIVES.items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        self._lock_conn = conn
        return conn

    # ------------------------------------------------------------------ ownership

    def _key(self, session_id: str) -> str:
        return self.sql.lock_key + session_id

    def try_lock(self, session_id: str) -> bool:
        """Take the session's advisory lock without waiting; ``False`` when another connection has it."""
        query = "SELECT pg_try_advisory_lock(hashtextextended(%s, %s))"
        with self._lock_mutex:
            for attempt in range(2):
                conn = self._lock_conn
                try:
                    if conn is None or conn.closed:
                        conn = self._connect_lock()
                    row = conn.execute(query, (self._key(session_id), LOCK_SEED)).fetchone()
                    return bool(row and row[0])
                except psycopg.OperationalError:
                    if attempt:
                        raise
                    logger.warning(
                        "the lock connection to %s was lost: the sessions this process held may be taken "
                        "over by others (their writes here are then refused); reconnecting",
                        self.target.name,
                    )
                    self._lock_conn = None
        raise AssertionError("unreachable")

    def unlock(self, session_ids: Collection[str]) -> None:
        """Drop the locks of ``session_ids``. Never raises: a lost connection dropped them already."""
        if not session_ids:
            return
        query = "SELECT pg_advisory_unlock(hashtextextended(k, %s)) FROM unnest(%s::text[]) AS k"
        with self._lock_mutex:
            conn = self._lock_conn
            if conn is None or conn.closed:
                return
            try:
                conn.execute(query, (LOCK_SEED, [self._key(sid) for sid in session_ids]))
            except psycopg.Error as exc:
                logger.warning("could not release session locks on %s: %s", self.target.name, self.target.redact(str(exc)))

    def holder(self, session_id: str) -> tuple[str | None, int | None]:
        """The recorded owner of a session: (host, pid), or Nones."""
        with self._pool.connection() as conn:
            row = conn.execute(self.sql.holder(), (session_id,)).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def claim(self, session_id: str) -> Claim | None:
        """Become the session's owner: a new epoch, and our identity. ``None`` if it is not stored.

        Call it holding the session's lock.
        """
        with self._pool.connection() as conn:
            row = conn.execute(self.sql.claim(), (self.host, self.pid, session_id)).fetchone()
        return None if row is None else Claim(epoch=row[0], count=row[1], titled=row[2])

    def create(
        self, session_id: str, *, created: float, meta: Any, events: Sequence[SessionEvent]
    ) -> Claim | tuple[int, SessionEvent | None]:
        """Store a new session with its first ``events`` at epoch 1, in one transaction.

        When the id is stored already, nothing is written and the stored count and last event are
        returned instead, for the caller to check. Call it holding the session's lock.
        """
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(self.sql.lock_row(), (session_id,)).fetchone()
            if row is not None:
                count = int(row[0])
                if count == 0:
                    return count, None
                last = conn.execute(self.sql.event_at(), (session_id, count - 1)).fetchone()
                return count, None if last is None else decode_event(session_id, *last)
            conn.execute(
                self.sql.insert_session(),
                {
                    "id": session_id,
                    "created": created,
                    "meta": json.dumps(meta),
                    "cwd": _text(meta.get("cwd")),
                    "parent_id": _text(meta.get("parent_id")),
                    "seed_length": meta.get("seed_length", 0),
                    "host": self.host,
                    "pid": self.pid,
                },
            )
            titled = False
            if events:
                titled = self._insert(conn, session_id, 1, 0, encoded(events), want_title=True)
        return Claim(epoch=1, count=len(events), titled=titled)

    # ------------------------------------------------------------------ writing

    def _insert(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        session_id: str,
        epoch: int,
        first: int,
        events: Sequence[Pending],
        *,
        want_title: bool,
        durable: bool = True,
    ) -> bool:
        """Commit ``events`` behind the fence, in one statement; ``_Rejected`` if the fence refuses.

        One statement (``Statements.append``): the fence UPDATE and the INSERT of the rows, which
        in autocommit is one transaction, one round trip and one commit. It replaced a transaction
        of fence UPDATE + ``COPY`` + ``COMMIT`` (five round trips, and a Python call per row to feed
        the COPY); see the plugin docs for the measurement. Returns whether the batch set the title.
        """
        batch = encode_batch(events, want_title=want_title)
        params = {
            "id": session_id,
            "epoch": epoch,
            "first": first,
            "end": first + batch.count,
            "turns": batch.turns,
            "title": batch.title,
            "batch": batch.payload,
        }
        statement = self._append if durable else self._append_relaxed
        if conn.execute(statement, params, prepare=True).rowcount != batch.count:
            raise _Rejected  # the fence matched nothing, so nothing was written
        return batch.title is not None

    def append(
        self,
        session_id: str,
        epoch: int,
        first: int,
        events: Sequence[Pending],
        *,
        want_title: bool,
        durable: bool = True,
    ) -> bool:
        """Commit ``events`` (seqs ``first``..., each with its line: ``encoded``) if ``epoch`` is
        current and ``first`` is the stored count.

        ``durable``: the commit returns once it is on the server's disk; otherwise once it is
        committed, on disk by the next durable commit or ``sync_point`` (see ``Statements.append``).

        Returns whether the batch gave the session its title. A batch found already committed (an
        earlier attempt whose answer was lost with its connection) is not written twice: under our
        epoch nobody else writes, so the stored rows past ``first`` are ours.

        :raises SessionFencedError: another owner took the session over (naming it).
        :raises SessionWriteError: the stored log does not end where this writer's does.
        :raises psycopg.Error: the server failed (the batch may be retried).
        """
        titled = False
        with self._pool.connection() as conn:
            for _ in range(2):
                try:
                    written = self._insert(
                        conn, session_id, epoch, first, events, want_title=want_title, durable=durable
                    )
                    return written or titled
                except _Rejected:
                    pass
                state = conn.execute(self.sql.state(), (session_id,)).fetchone()
                if state is None:
                    msg = (
                        f"session {session_id!r} was deleted while this process owned it (owner epoch "
                        f"{epoch}); nothing more is written"
                    )
                    raise SessionFencedError(msg, session_id=session_id, host=None, pid=None, epoch=epoch)
                current, count, host, pid = state
                if current != epoch:
                    msg = (
                        f"session {session_id!r} was taken over by {holder_text(host, pid)} (owner epoch "
                        f"{current}; this process had epoch {epoch}): this process no longer writes it, and "
                        f"its {len(events)} unstored events are dropped. Resume the session where it lives now"
                    )
                    raise SessionFencedError(msg, session_id=session_id, host=host, pid=pid, epoch=epoch)
                done = count - first
                if not 0 < done <= len(events):
                    msg = (
                        f"session {session_id!r}: the stored log has {count} events but this writer's "
                        f"next event is {first}; nothing more is written. Load the session to go on"
                    )
                    raise SessionWriteError(msg, session_id=session_id)
                events = events[done:]
                first = count
                if not events:
                    return titled
        msg = f"session {session_id!r}: a batch was refused twice under the current epoch"
        raise SessionWriteError(msg, session_id=session_id)

    def sync_point(self) -> None:
        """Return once every commit before it is on the server's disk.

        A transaction that takes a transaction id commits with a commit record, and a synchronous
        commit waits for the WAL up to that record: every earlier commit of the server included.
        """
        with self._pool.connection() as conn:
            conn.execute("SELECT txid_current()")

    # ------------------------------------------------------------------ reading

    def exists(self, session_id: str) -> bool:
        with self._pool.connection() as conn:
            row = conn.execute(self.sql.exists(), (session_id,)).fetchone()
        return bool(row and row[0])

    def read(self, session_id: str) -> Stored:
        """The stored session, as one consistent snapshot.

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionCorruptError: a gap in the seqs or a malformed row.
        """
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            header = conn.execute(self.sql.header(), (session_id,)).fetchone()
            if header is None:
                raise not_found(session_id)
            # Decoded as the rows are read: the driver's row tuples never all live at once.
            events = decode_rows(session_id, conn.execute(self.sql.events(), (session_id,)))
        created, meta_text, count = header
        if len(events) != count:
            msg = (
                f"session {session_id!r}: dsh_sessions counts {count} events but dsh_events holds "
                f"{len(events)}; the stored log is damaged and nothing was changed. Cut it to what is sound "
                f"with `dsh sessions repair <id>`, or delete the session"
            )
            raise SessionCorruptError(msg, session_id=session_id, seq=min(count, len(events)))
        return Stored(created=float(created), meta=json.loads(meta_text), events=events)

    def listing(self) -> list[tuple[Any, ...]]:
        with self._pool.connection() as conn:
            return conn.execute(self.sql.listing()).fetchall()

    def delete(self, session_id: str) -> bool:
        """Remove a session, its events and the rows ``repair`` kept of it, in one transaction.

        Returns ``False`` if it was not stored.
        """
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(self.sql.delete_events(), (session_id,))
            gone = conn.execute(self.sql.delete_session(), (session_id,)).fetchone()
            found = conn.execute(self.sql.damaged_exists(), (self.schema,)).fetchone()
            if found is not None and found[0]:
                conn.execute(self.sql.delete_damaged(), (session_id,))
        return gone is not None

    # ------------------------------------------------------------------ the explicit repair

    def repair(self, session_id: str) -> Repaired | None:
        """Cut the stored log before the first event ``read`` refuses, in one transaction.

        The cut rows move to ``dsh_damaged`` under the new owner epoch this takes (so a stale
        writer is fenced off too); the session's count, turns and title are set from what is
        kept. A sound log is left as it is. ``None`` when nothing is stored under ``session_id``.
        Call it holding the session's lock.
        """
        with self._pool.connection() as conn, conn.transaction():
            claimed = conn.execute(self.sql.claim(), (self.host, self.pid, session_id)).fetchone()
            if claimed is None:
                return None
            epoch = int(claimed[0])
            header = conn.execute(self.sql.header(), (session_id,)).fetchone()
            assert header is not None  # the row is locked by the claim
            count = int(header[2])
            meta = SessionMeta.from_json(json.loads(header[1]), field="meta")
            rows = conn.execute(self.sql.events(), (session_id,)).fetchall()
            kept, refused = sound_prefix(session_id, meta, rows)
            keep = min(len(kept), count)
            problem = None if refused is None else str(refused)
            if problem is None and len(rows) != count:
                problem = (
                    f"session {session_id!r}: dsh_sessions counts {count} events but dsh_events holds "
                    f"{len(rows)} rows"
                )
            if problem is None:
                return Repaired(epoch=epoch, seq=None, dropped=0, events=count, problem=None)
            dropped = len(rows) - keep
            params: dict[str, Any] = {"id": session_id, "epoch": epoch, "keep": keep, "problem": problem}
            if dropped:
                schema_lock(conn, self.schema)
                conn.execute(self.sql.create_damaged())
                conn.execute(self.sql.keep_damaged(), params)
                conn.execute(self.sql.cut_events(), params)
            turns, title = summarize(kept[:keep])
            conn.execute(self.sql.set_count(), {**params, "turns": turns, "title": title})
        return Repaired(epoch=epoch, seq=keep, dropped=dropped, events=keep, problem=problem)


def _text(value: str | None) -> str | None:
    """``value`` for a text column, which cannot hold NUL (the ``meta`` JSON keeps the exact value)."""
    return None if value is None else value.replace("\x00", "\ufffd")


class _Rejected(Exception):
    """The fenced insert matched no session row (stale epoch, or the log moved on)."""


def not_found(session_id: str) -> SessionNotFoundError:
    msg = f"no stored session {session_id!r}; list them with session_persistence.list()"
    return SessionNotFoundError(msg, session_id=session_id)
