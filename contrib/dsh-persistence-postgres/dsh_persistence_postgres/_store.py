"""The ``session_persistence`` service: load (with crash repair), read, exists, list, delete, repair;
and following live sessions.

Every session that enters the store is *followed*: this store takes its lock and a new owner
epoch (storing it with its first events when it is new), and every event it publishes is
committed by the ``BatchWriter``. ``load`` takes the lock and the epoch and keeps them as a
*reservation* for the session that resumes the log, so no other process can slip in between the
load and the resume. A reservation nobody claims is released by ``release``, ``delete`` or when
the plugin stops.

Queries run in worker threads (``anyio.to_thread``), at most as many at once as the pool has
connections; the commits of urgent records run in the ``UrgentWriter``'s threads, without the
event loop (§9.1).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
import attrs
import psycopg

from dsh_core import SessionEvent, SessionMeta, StoredLogError, repair_events
from dsh_core.persistence import BatchWriter, UrgentWriter, continues_log, is_urgent

from ._codec import check_events, encode_line, encoded
from ._database import Claim, Database, not_found
from ._errors import (
    DatabaseError,
    PersistenceError,
    SessionConflictError,
    SessionCorruptError,
    SessionInUseError,
)
from ._owners import Owners
from ._types import LoadedSession, RepairReport, SessionInfo
from ._writer import Journal

if TYPE_CHECKING:
    from dsh_core import Session

__all__ = ["PostgresSessionStore"]

logger = logging.getLogger("dsh.persistence_postgres")

T = TypeVar("T")


@attrs.frozen
class _Reservation:
    """What ``load()`` leaves for the session that resumes the log: the epoch, and where the log ends."""

    claim: Claim
    #: the last stored event (``None`` for an empty log): the resumed session must hold it at ``count - 1``
    last: SessionEvent | None


class PostgresSessionStore:
    """The ``session_persistence`` service of the ``persistence-postgres`` plugin (see its docs)."""

    def __init__(self, db: Database, batch_delay: float, *, connections: int) -> None:
        self._db = db
        self._limiter = anyio.CapacityLimiter(connections)
        self._owners = Owners(db, self._run)
        self._writer = BatchWriter(batch_delay)
        self._urgent = UrgentWriter(connections, name="dsh-persistence-postgres")
        self._followed: dict[str, Journal] = {}
        self._reserved: dict[str, _Reservation] = {}
        self._closed = False
        self._late: set[str] = set()

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the tables."""
        return self._db.schema

    @property
    def server(self) -> str:
        """The server as messages name it (``user@host:port/dbname``; never the password)."""
        return self._db.target.name

    @property
    def batch_delay(self) -> float:
        return self._writer.delay

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread; a driver error becomes a ``DatabaseError``."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=self._limiter)
        except psycopg.Error as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: psycopg.Error) -> DatabaseError:
        target = self._db.target
        msg = f"the session database {target.name} failed: {target.redact(str(exc)).strip()}"
        return DatabaseError(msg, target=target.name)

    # ------------------------------------------------------------------ the service

    async def exists(self, session_id: str) -> bool:
        """Whether a session is stored under ``session_id``."""
        self._check_open("look up a session")
        return await self._run(self._db.exists, session_id)

    async def load(self, session_id: str) -> LoadedSession:
        """Take the session over and read, check and repair its stored log.

        A turn left open is closed with repair events, committed before this returns. The
        session's lock and its new owner epoch stay reserved for the session that resumes the
        log (``ctx.sessions.prepare(id, meta=..., seed=events)``).

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: another process holds the session (naming its host and pid),
            or it is live here.
        :raises SessionCorruptError: the stored log is damaged (naming the seq; nothing is changed).
        :raises DatabaseError: the server failed.
        """
        self._check_open("load a session")
        self._refuse_live(session_id, "loading it again")
        earlier = self._reserved.pop(session_id, None)
        if earlier is None:
            await self._owners.acquire(session_id)
        try:
            claim = await self._run(self._db.claim, session_id)
            if claim is None:
                raise not_found(session_id)
            loaded = await self._read(session_id, claim.epoch)
            if loaded.repaired:
                first = len(loaded.events) - len(loaded.repaired)
                titled = await self._run(
                    functools.partial(self._db.append, want_title=not claim.titled),
                    session_id,
                    claim.epoch,
                    first,
                    encoded(loaded.repaired),
                )
                claim = attrs.evolve(claim, titled=claim.titled or titled)
                logger.warning(
                    "session %r: the log ended inside a turn; closed it with %d repair events",
                    session_id,
                    len(loaded.repaired),
                )
            claim = attrs.evolve(claim, count=len(loaded.events))
        except BaseException:
            self._owners.release_soon(session_id)
            raise
        if self._closed or session_id in self._followed:  # the plugin stopped, or a race: do not keep it
            self._owners.release_soon(session_id)
        else:
            last = loaded.events[-1] if loaded.events else None
            self._reserved[session_id] = _Reservation(claim, last)
        return loaded

    async def read(self, session_id: str) -> LoadedSession:
        """The stored log of ``session_id`` as ``load`` would return it, for viewing only.

        Takes no lock and writes nothing: the repair events of an open turn are computed in
        memory (``repaired``), never stored. Safe while another process has the session open.
        """
        self._check_open("read a session")
        await self._writer.write_all()
        return await self._read(session_id, 0)

    async def _read(self, session_id: str, epoch: int) -> LoadedSession:
        return await self._run(self._read_blocking, session_id, epoch)

    def _read_blocking(self, session_id: str, epoch: int) -> LoadedSession:
        """Read, check every event as ``session.append`` would, and compute the crash repair."""
        stored = self._db.read(session_id)
        meta = SessionMeta.from_json(stored.meta, field="meta")
        checked = check_events(session_id, meta, stored.events)
        try:
            repaired = tuple(repair_events(stored.events))
        except StoredLogError as exc:
            msg = f"session {session_id!r}: event {exc.seq}: {exc}; nothing was changed"
            raise SessionCorruptError(msg, session_id=session_id, seq=exc.seq) from exc
        return LoadedSession(
            id=session_id,
            meta=meta,
            events=tuple(stored.events) + repaired,
            created=stored.created,
            repaired=repaired,
            epoch=epoch,
            checked=checked,
        )

    async def repair(self, session_id: str) -> RepairReport:
        """Cut the stored log of ``session_id`` before its first damaged event, keeping what it cuts.

        The explicit step after a ``SessionCorruptError``: in one transaction, the rows from the
        first event ``load`` refuses on are moved to ``<schema>.dsh_damaged`` (created on first
        use) and the session's count, turns and title are set from what is kept. A sound log is
        left alone. Takes a new owner epoch, so a writer that still holds the old one is fenced.
        Resume it afterwards as usual (a turn the cut leaves open is closed by crash repair then).

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: the session is live here or held by another process.
        :raises DatabaseError: the server failed (nothing was changed).
        """
        self._check_open("repair a session")
        self._refuse_live(session_id, "repairing it")
        if self._reserved.pop(session_id, None) is None:
            await self._owners.acquire(session_id)
        try:
            done = await self._run(self._db.repair, session_id)
        finally:
            await self._owners.release(session_id)
        if done is None:
            raise not_found(session_id)
        backup = None
        if done.dropped:
            backup = f"{self._db.schema}.dsh_damaged (session_id = {session_id!r}, epoch = {done.epoch})"
        report = RepairReport(
            id=session_id,
            seq=done.seq,
            dropped_events=done.dropped,
            events=done.events,
            backup=backup,
            epoch=done.epoch,
            problem=done.problem,
        )
        if done.seq is not None:
            logger.warning(
                "session %r: cut at event %d (%d rows moved to %s)", session_id, done.seq, done.dropped, backup
            )
        return report

    def release(self, session_id: str) -> None:
        """Give up the reservation ``load`` kept, when the resume that was to follow failed.

        Idempotent; a session that is live here is not affected.
        """
        if session_id in self._followed:
            return
        if self._reserved.pop(session_id, None) is not None:
            self._owners.release_soon(session_id)

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every stored session, oldest first (by ``created``), each from its ``dsh_sessions`` row."""
        self._check_open("list sessions")
        await self._writer.write_all()  # counts include what the live sessions published a moment ago
        rows = await self._run(self._db.listing)
        return tuple(
            SessionInfo(
                id=row[0],
                created=row[1],
                modified=row[2],
                cwd=row[3],
                parent_id=row[4],
                seed_length=row[5],
                events=row[6],
                turns=row[7],
                title=row[8],
            )
            for row in rows
        )

    async def delete(self, session_id: str) -> None:
        """Remove the stored session: its row and every event row, in one transaction.

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: the session is live here or held by another process.
        """
        self._check_open("delete a session")
        self._refuse_live(session_id, "deleting it")
        if self._reserved.pop(session_id, None) is None:
            await self._owners.acquire(session_id)
        try:
            if not await self._run(self._db.delete, session_id):
                raise not_found(session_id)
        finally:
            await self._owners.release(session_id)

    def _refuse_live(self, session_id: str, doing: str) -> None:
        if session_id in self._followed:
            db = self._db
            msg = (
                f"session {session_id!r} is in use by process {db.pid} on host {db.host} (this process: it "
                f"is live in this harness); dispose it before {doing}"
            )
            raise SessionInUseError(msg, session_id=session_id, host=db.host, pid=db.pid)

    def _check_open(self, what: str) -> None:
        if self._closed:
            msg = f"cannot {what}: the persistence-postgres plugin has stopped"
            raise PersistenceError(msg)

    # ------------------------------------------------------------------ following live sessions

    async def follow(self, session: Session) -> None:
        """Start persisting ``session``: own it (storing it if it is new), then commit all it publishes.

        Never raises: a session that cannot be persisted (in use elsewhere, conflicting with the
        stored log, the server unreachable) is logged now and fails each of its flushes with the reason.
        """
        if self._closed:
            return
        session_id = session.id
        taken = self._followed.get(session_id)
        if taken is not None:
            if taken.session is not session:
                logger.error("session %r: another live session with this id is already persisted", session_id)
            return
        journal = Journal(session, self._db, self._limiter)
        self._followed[session_id] = journal  # from here on the listener buffers its events
        snapshot = list(session.events)
        reservation = self._reserved.pop(session_id, None)
        async with journal.io:
            try:
                with anyio.CancelScope(shield=True):  # the queries finish anyway; keep their result
                    claim = await self._open(session, snapshot, reservation)
            except PersistenceError as exc:
                journal.broken = exc
                journal.pending.clear()
                logger.error("session %r will not be persisted: %s", session_id, exc)
                return
            journal.opened(claim, snapshot)
        if self._followed.get(session_id) is not journal:  # disposed while opening
            await journal.close()
            await self._owners.release(session_id)
        elif journal.urgent:  # an urgent event came while the session was opening
            self._urgent.submit(journal)
        elif journal.pending:
            self._writer.mark(journal)

    async def _open(
        self, session: Session, snapshot: Sequence[SessionEvent], reservation: _Reservation | None
    ) -> Claim:
        session_id = session.id
        if reservation is not None:
            count, last = reservation.claim.count, reservation.last
            if not continues_log(snapshot, count, last):
                self._owners.release_soon(session_id)
                raise self._conflict(session_id, count)
            return reservation.claim
        await self._owners.acquire(session_id)
        try:
            created = await self._run(
                functools.partial(
                    self._db.create, session_id, created=time.time(), meta=session.meta.to_json(), events=snapshot
                )
            )
            if isinstance(created, Claim):
                return created
            count, last = created
            if not continues_log(snapshot, count, last):
                raise self._conflict(session_id, count)
            claim = await self._run(self._db.claim, session_id)
            if claim is None:  # deleted meanwhile: impossible while we hold the lock
                raise not_found(session_id)
            return claim
        except BaseException:
            await self._owners.release(session_id)
            raise

    def _conflict(self, session_id: str, count: int) -> SessionConflictError:
        msg = (
            f"session {session_id!r} cannot be persisted to {self._db.target.name} (schema "
            f"{self._db.schema!r}): its {count} stored events are not the start of this session's log. "
            f"Resume the stored session with ctx.agents.resume({session_id!r}) (or load() it) instead of "
            f"creating a new one with its id, or delete it first (ctx.session_persistence.delete({session_id!r}))"
        )
        return SessionConflictError(msg, session_id=session_id)

    def problem_of(self, session: Session) -> PersistenceError | None:
        """Why ``session`` is not being persisted (in use, conflicting log, unreachable), or ``None``."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return None
        return journal.broken

    def publish(self, session: Session, event: SessionEvent) -> None:
        """The ``session/event`` listener: buffer the event and wake the writer. Must stay cheap."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            if self._closed and session.id not in self._late:
                self._late.add(session.id)
                logger.warning(
                    "session %r: events published after the persistence-postgres plugin stopped are not stored",
                    session.id,
                )
            return
        if journal.broken is not None:
            return
        journal.pending.append((event, encode_line(event)))
        if is_urgent(session, event):
            journal.urgent = True  # its commit is durable, whichever write makes it (§9.1)
            self._urgent.submit(journal)  # committed now by a thread of ours: the event loop may stay busy
        elif not journal.dirty:
            self._writer.mark(journal)

    async def flush(self, session: Session) -> None:
        """The ``session/flush`` listener: everything published so far is committed.

        :raises SessionWriteError: naming the session and the server, when it is not.
        :raises PersistenceError: the session could not be persisted at all (in use, conflict, fenced).
        """
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return
        await journal.sync()

    async def unfollow(self, session: Session) -> None:
        """The ``session/disposed`` listener: commit what is pending, then give the session up."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return
        del self._followed[session.id]
        await journal.close()
        if journal.epoch is not None:
            await self._owners.release(session.id)

    async def run_writer(self) -> None:
        """The background writer task (one per plugin)."""
        await self._writer.run()

    async def run_releases(self) -> None:
        """The background task that gives back the locks ``release()`` let go of."""
        await self._owners.run()

    async def close(self) -> None:
        """The plugin stops: commit every followed session; the locks go with the lock connection."""
        self._closed = True
        journals = list(self._followed.values())
        self._followed.clear()
        async with anyio.create_task_group() as tg:  # concurrently: an unreachable server costs one timeout
            for journal in journals:
                tg.start_soon(journal.close)
        self._reserved.clear()
        self._owners.forget()
        await anyio.to_thread.run_sync(self._urgent.stop)  # the journals are closed: its threads end now
        await anyio.to_thread.run_sync(self._db.close)

    def __repr__(self) -> str:
        return f"<PostgresSessionStore {self.server} schema={self.schema!r} following={len(self._followed)}>"
