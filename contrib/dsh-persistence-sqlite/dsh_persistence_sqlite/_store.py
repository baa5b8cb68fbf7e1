"""The ``session_persistence`` service: load (with crash repair), read, exists, list, delete, repair;
and following live sessions.

Every session that enters the store is *followed*: the store takes its lock (``Owners``) and a new
owner epoch (storing the session with its first events when it is new), and every event it
publishes is committed by the ``BatchWriter`` (or at once, by the ``UrgentWriter``, for §9.1's
records). ``load`` takes the lock and the epoch and keeps them as a *reservation* for the session
that resumes the log, so no other process can slip in between the load and the resume. A
reservation nobody claims is released by ``release``, ``delete`` or when the plugin stops.

Queries run in worker threads (``anyio.to_thread``); the lock calls are single syscalls and run on
the event loop.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
import attrs

from dsh_core import SessionEvent, SessionMeta, StoredLogError, VocabularyError, repair_events
from dsh_core.persistence import (
    BatchWriter,
    PersistenceError,
    RepairReport,
    SessionConflictError,
    SessionCorruptError,
    SessionInfo,
    SessionInUseError,
    StoredSession,
    StoreUnavailableError,
    UrgentWriter,
    check_stored_events,
    continues_log,
    decode_event_row,
    decode_event_rows,
    gc_paused,
    is_urgent,
    loads_strict,
    sound_prefix,
    title_of,
)
from dsh_core.session_log import TurnStartEvent, UserMessageEvent

from ._database import Claim, Database, holder_text, not_found
from ._owners import Owners
from ._rows import encode_row, turns_in
from ._writer import Journal

if TYPE_CHECKING:
    from dsh_core import Session

__all__ = ["SqliteSessionStore"]

logger = logging.getLogger("dsh.persistence_sqlite")

T = TypeVar("T")


@attrs.frozen
class _Reservation:
    """What ``load()`` leaves for the session that resumes the log: the epoch, and where the log ends."""

    claim: Claim
    #: the last stored event (``None`` for an empty log): the resumed session must hold it at ``count - 1``
    last: SessionEvent | None


class SqliteSessionStore:
    """The ``session_persistence`` service of the ``persistence-sqlite`` plugin (see its docs)."""

    def __init__(self, db: Database, owners: Owners, batch_delay: float) -> None:
        self._db = db
        self._owners = owners
        self._writer = BatchWriter(batch_delay, concurrent=False)  # SQLite: one writer at a time
        self._urgent = UrgentWriter(2, name="dsh-persistence-sqlite")
        self._followed: dict[str, Journal] = {}
        self._reserved: dict[str, _Reservation] = {}
        self._closed = False
        self._late: set[str] = set()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    @property
    def batch_delay(self) -> float:
        return self._writer.delay

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread; a database failure becomes a ``StoreUnavailableError``."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args))
        except sqlite3.Error as exc:
            target = str(self._db.path)
            msg = f"the session database {target} failed: {exc}"
            raise StoreUnavailableError(msg, target=target) from exc

    # ------------------------------------------------------------------ ownership

    async def _acquire(self, session_id: str) -> None:
        """Own ``session_id``, or say who does. :raises SessionInUseError: naming the holder's host and pid."""
        if self._owners.try_acquire(session_id):
            return
        host, pid = await self._run(self._db.holder, session_id)
        msg = (
            f"session {session_id!r} is in use by {holder_text(host, pid)} (database {self._db.path}); stop "
            f"that process or dispose the session there, then try again"
        )
        raise SessionInUseError(msg, session_id=session_id, host=host, pid=pid)

    def _refuse_live(self, session_id: str, doing: str) -> None:
        if session_id in self._followed:
            db = self._db
            msg = (
                f"session {session_id!r} is in use by process {db.pid} on host {db.host} (this process: it is "
                f"live in this harness); dispose it before {doing}"
            )
            raise SessionInUseError(msg, session_id=session_id, host=db.host, pid=db.pid)

    def _check_open(self, what: str) -> None:
        if self._closed:
            msg = f"cannot {what}: the persistence-sqlite plugin has stopped"
            raise PersistenceError(msg)

    # ------------------------------------------------------------------ the service

    async def exists(self, session_id: str) -> bool:
        """Whether a session is stored under ``session_id``."""
        self._check_open("look up a session")
        return await self._run(self._db.exists, session_id)

    async def load(self, session_id: str) -> StoredSession:
        """Take the session over and read, check and repair its stored log.

        A turn left open is closed with repair events, committed (durably) before this returns. The
        session's lock and its new owner epoch stay reserved for the session that resumes the log.

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: another process holds the session (naming its host and pid), or it
            is live here.
        :raises SessionCorruptError: the stored log is damaged (naming the seq; nothing is changed).
        :raises StoreUnavailableError: the database failed.
        """
        self._check_open("load a session")
        self._refuse_live(session_id, "loading it again")
        earlier = self._reserved.pop(session_id, None)
        if earlier is None:
            await self._acquire(session_id)
        try:
            claim = await self._run(self._db.claim, session_id)
            if claim is None:
                raise not_found(session_id, self._db.path)
            loaded = await self._run(self._read_blocking, session_id)
            if loaded.repaired:
                first = len(loaded.events) - len(loaded.repaired)
                rows = [encode_row(session_id, event) for event in loaded.repaired]
                append = functools.partial(self._db.append, turns=0, title=None, durable=True)
                await self._run(append, session_id, claim.epoch, first, rows)
                logger.warning(
                    "session %r: the log ended inside a turn; closed it with %d repair events",
                    session_id,
                    len(loaded.repaired),
                )
            claim = attrs.evolve(claim, count=len(loaded.events))
        except BaseException:
            self._owners.release(session_id)
            raise
        if self._closed or session_id in self._followed:  # the plugin stopped, or a race: do not keep it
            self._owners.release(session_id)
        else:
            self._reserved[session_id] = _Reservation(claim, loaded.events[-1] if loaded.events else None)
        return loaded

    async def read(self, session_id: str) -> StoredSession:
        """The stored log of ``session_id`` as ``load`` would return it, for viewing only.

        Takes no lock and writes nothing: the repair events of an open turn are computed in memory
        (``repaired``), never stored. Safe while another process has the session open.
        """
        self._check_open("read a session")
        await self._writer.write_all()
        return await self._run(self._read_blocking, session_id)

    def _read_blocking(self, session_id: str) -> StoredSession:
        """Read, check every event as ``session.append`` would, and compute the crash repair.

        The collector is paused throughout: the rows fetched and the events built from them all stay
        alive until the events are made, and collections they would trigger cost a third of the read.
        """
        with gc_paused():
            return self._read_paused(session_id)

    def _read_paused(self, session_id: str) -> StoredSession:
        stored = self._db.read(session_id)
        if stored is None:
            raise not_found(session_id, self._db.path)
        meta = self._meta(session_id, stored.meta)
        events = decode_event_rows(session_id, stored.rows)
        checked = check_stored_events(session_id, meta, events)
        try:
            repaired = tuple(repair_events(events))
        except StoredLogError as exc:
            msg = f"session {session_id!r}: event {exc.seq}: {exc}; nothing was changed"
            raise SessionCorruptError(msg, session_id=session_id, seq=exc.seq) from exc
        return StoredSession(
            id=session_id,
            meta=meta,
            events=(*events, *repaired),
            created=stored.created,
            repaired=repaired,
            checked=checked,
        )

    def _meta(self, session_id: str, text: str) -> SessionMeta:
        try:
            return SessionMeta.from_json(loads_strict(text), field="meta")
        except (VocabularyError, TypeError, ValueError) as exc:
            msg = f"session {session_id!r} in {self._db.path}: its meta is damaged ({exc}); nothing was changed"
            raise SessionCorruptError(msg, session_id=session_id) from exc

    async def repair(self, session_id: str) -> RepairReport:
        """Cut the stored log of ``session_id`` before its first damaged event, keeping what it cuts.

        The explicit step after a ``SessionCorruptError``: in one transaction the rows from the first
        event ``load`` refuses on move to ``dsh_damaged`` (with the repair's new epoch) and the
        session's counts and title are set from what is kept. A sound log is left alone. Resume it
        afterwards as usual (a turn the cut leaves open is closed by crash repair then).

        :raises SessionNotFoundError: :raises SessionInUseError: the session is live here or elsewhere.
        """
        self._check_open("repair a session")
        self._refuse_live(session_id, "repairing it")
        if self._reserved.pop(session_id, None) is None:
            await self._acquire(session_id)
        try:
            return await self._run(self._repair_blocking, session_id)
        finally:
            self._owners.release(session_id)

    def _repair_blocking(self, session_id: str) -> RepairReport:
        stored = self._db.read(session_id)
        if stored is None:
            raise not_found(session_id, self._db.path)
        meta = self._meta(session_id, stored.meta)
        events, problem = sound_prefix(session_id, meta, stored.rows)
        if problem is None:
            return RepairReport(id=session_id, seq=None, dropped_events=0, events=len(events))
        seq = len(events)
        turns = sum(1 for event in events if event.type == TurnStartEvent.type)
        title = next((title_of(e) for e in events if e.type == UserMessageEvent.type), None)
        epoch, moved = self._db.cut(session_id, seq, turns=turns, title=title)
        backup = f"{self._db.path}: dsh_damaged (session_id = {session_id!r}, epoch = {epoch})"
        logger.warning("session %r: cut at event %d (%d rows moved to %s)", session_id, seq, moved, backup)
        return RepairReport(
            id=session_id, seq=seq, dropped_events=moved, events=seq, backup=backup, problem=str(problem)
        )

    def release(self, session_id: str) -> None:
        """Give up the reservation ``load`` kept, when the resume that was to follow failed (idempotent)."""
        if session_id in self._followed:
            return
        if self._reserved.pop(session_id, None) is not None:
            self._owners.release(session_id)

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

        :raises SessionNotFoundError: :raises SessionInUseError: the session is live here or elsewhere.
        """
        self._check_open("delete a session")
        self._refuse_live(session_id, "deleting it")
        if self._reserved.pop(session_id, None) is None:
            await self._acquire(session_id)
        try:
            if not await self._run(self._db.delete, session_id):
                raise not_found(session_id, self._db.path)
        finally:
            self._owners.release(session_id)

    # ------------------------------------------------------------------ following live sessions

    async def follow(self, session: Session) -> None:
        """Start persisting ``session``: own it (storing it if it is new), then commit all it publishes.

        Never raises: a session that cannot be persisted (in use elsewhere, conflicting with the stored
        log, the database failing) is logged now and fails each of its flushes with the reason.
        """
        if self._closed:
            return
        session_id = session.id
        taken = self._followed.get(session_id)
        if taken is not None:
            if taken.session is not session:
                logger.error("session %r: another live session with this id is already persisted", session_id)
            return
        journal = Journal(session, self._db)
        self._followed[session_id] = journal  # from here on the listener buffers its rows
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
            journal.opened(claim, [encode_row(session_id, event) for event in snapshot[claim.count :]])
        if self._followed.get(session_id) is not journal:  # disposed while opening
            await journal.close()
            self._owners.release(session_id)
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
                self._owners.release(session_id)
                raise self._conflict(session_id, count)
            return reservation.claim
        await self._acquire(session_id)
        try:
            rows = [encode_row(session_id, event) for event in snapshot]
            title = next((title_of(e) for e in snapshot if e.type == UserMessageEvent.type), None)
            meta = session.meta
            create = functools.partial(
                self._db.create,
                session_id,
                created=time.time(),
                meta=_dumps(meta.to_json()),
                cwd=meta.cwd,
                parent_id=meta.parent_id,
                seed_length=meta.seed_length,
                rows=rows,
                turns=turns_in(rows),
                title=title,
            )
            created = await self._run(create)
            if isinstance(created, Claim):
                return created
            count = created
            last_row = await self._run(self._db.last_row, session_id, count)
            last = decode_event_row(session_id, *last_row) if last_row is not None else None
            if not continues_log(snapshot, count, last):
                raise self._conflict(session_id, count)
            claim = await self._run(self._db.claim, session_id)
            if claim is None:  # deleted meanwhile: impossible while we hold the lock
                raise not_found(session_id, self._db.path)
            return claim
        except BaseException:
            self._owners.release(session_id)
            raise

    def _conflict(self, session_id: str, count: int) -> SessionConflictError:
        msg = (
            f"session {session_id!r} cannot be persisted to {self._db.path}: its {count} stored events are not "
            f"the start of this session's log. Resume the stored session with ctx.agents.resume({session_id!r}) "
            f"(or load() it) instead of creating a new one with its id, or delete it first "
            f"(ctx.session_persistence.delete({session_id!r}))"
        )
        return SessionConflictError(msg, session_id=session_id, path=self._db.path)

    def problem_of(self, session: Session) -> PersistenceError | None:
        """Why ``session`` is not being persisted (in use, conflicting log, the database), or ``None``."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return None
        return journal.broken

    def publish(self, session: Session, event: SessionEvent) -> None:
        """The ``session/event`` listener: encode the event's row, buffer it, wake a writer. Cheap."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            if self._closed and session.id not in self._late:
                self._late.add(session.id)
                logger.warning(
                    "session %r: events published after the persistence-sqlite plugin stopped are not stored",
                    session.id,
                )
            return
        if journal.broken is not None:
            return
        journal.add(event, encode_row(session.id, event))
        if is_urgent(session, event):
            journal.urgent_seq = event.seq
            journal.urgent = True  # its commit is durable, whichever write makes it (§9.1)
            if journal.epoch is not None:
                self._urgent.submit(journal)  # committed now by a thread of ours: the loop may stay busy
        elif not journal.dirty:
            self._writer.mark(journal)

    async def flush(self, session: Session) -> None:
        """The ``session/flush`` listener: everything published so far is committed and fsynced.

        :raises SessionWriteError: naming the session and the file, when it is not.
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
            self._owners.release(session.id)

    async def run_writer(self) -> None:
        """The background writer task (one per plugin)."""
        await self._writer.run()

    async def close(self) -> None:
        """The plugin stops: commit every followed session, then give every session back."""
        self._closed = True
        journals = list(self._followed.values())
        self._followed.clear()
        for journal in journals:
            await journal.close()
        self._reserved.clear()
        await anyio.to_thread.run_sync(self._urgent.stop)  # the journals are closed: its threads end now
        self._owners.close()
        await anyio.to_thread.run_sync(self._db.close)

    def __repr__(self) -> str:
        return f"<SqliteSessionStore {str(self._db.path)!r} following={len(self._followed)}>"


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
