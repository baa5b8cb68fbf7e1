"""The ``session_persistence`` service: load (with crash repair), read, exists, list, delete, repair;
and following live sessions.

Following live sessions and ``load``'s reservation are the core's ``JournaledStore``
(``dsh_core.persistence``); this module gives it SQLite's pieces: the lock (``Owners``), creating,
claiming, reading, repairing and listing sessions.

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
from typing import TYPE_CHECKING, ClassVar, TypeVar

import anyio
import anyio.to_thread
import attrs

from dsh_core import SessionEvent, SessionMeta, StoredLogError, VocabularyError, repair_events
from dsh_core.persistence import (
    JournaledStore,
    RepairReport,
    SessionConflictError,
    SessionCorruptError,
    SessionInUseError,
    SessionNotFoundError,
    StoredSession,
    StoreUnavailableError,
    check_stored_events,
    decode_event_row,
    decode_event_rows,
    gc_paused,
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


class SqliteSessionStore(JournaledStore[Journal, Claim]):
    """The ``session_persistence`` service of the ``persistence-sqlite`` plugin (see its docs)."""

    log: ClassVar[logging.Logger] = logger
    plugin: ClassVar[str] = "persistence-sqlite"

    def __init__(self, db: Database, owners: Owners, batch_delay: float) -> None:
        super().__init__(db, batch_delay, concurrent=False, urgent_threads=2)  # SQLite: one writer at a time
        self._db = db
        self._owners = owners

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread; a database failure becomes a ``StoreUnavailableError``."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args))
        except sqlite3.Error as exc:
            target = str(self._db.path)
            msg = f"the session database {target} failed: {exc}"
            raise StoreUnavailableError(msg, target=target) from exc

    # ------------------------------------------------------------------ ownership and the base's pieces

    def _journal(self, session: Session) -> Journal:
        return Journal(session, self._db)

    async def _release(self, session_id: str) -> None:
        self._owners.release(session_id)

    def _release_soon(self, session_id: str) -> None:
        self._owners.release(session_id)

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return not_found(session_id, self._db.path)

    async def _stop(self) -> None:
        self._owners.close()
        await anyio.to_thread.run_sync(self._db.close)

    async def _load_claimed(self, session_id: str, claim: Claim) -> tuple[Claim, StoredSession]:
        loaded = await self._run(self._read_blocking, session_id)
        if loaded.repaired:
            first = len(loaded.events) - len(loaded.repaired)
            rows = [encode_row(session_id, event) for event in loaded.repaired]
            append = functools.partial(self._db.append, turns=0, title=None, durable=True)
            await self._run(append, session_id, claim.epoch, first, rows)
        return attrs.evolve(claim, count=len(loaded.events)), loaded

    async def _create(self, session: Session, snapshot: Sequence[SessionEvent]) -> Claim | tuple[int, SessionEvent | None]:
        session_id = session.id
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
        last_row = await self._run(self._db.last_row, session_id, created)
        return created, decode_event_row(session_id, *last_row) if last_row is not None else None

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

    # ------------------------------------------------------------------ the service

    async def exists(self, session_id: str) -> bool:
        """Whether a session is stored under ``session_id``."""
        self._check_open("look up a session")
        return await self._run(self._db.exists, session_id)

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
        async with self._owning(session_id, "repairing it"):
            return await self._run(self._repair_blocking, session_id)

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

    async def delete(self, session_id: str) -> None:
        """Remove the stored session: its row and every event row, in one transaction.

        :raises SessionNotFoundError: :raises SessionInUseError: the session is live here or elsewhere.
        """
        self._check_open("delete a session")
        async with self._owning(session_id, "deleting it"):
            if not await self._run(self._db.delete, session_id):
                raise not_found(session_id, self._db.path)

    def _conflict(self, session_id: str, count: int) -> SessionConflictError:
        msg = (
            f"session {session_id!r} cannot be persisted to {self._db.path}: its {count} stored events are not "
            f"the start of this session's log. Resume the stored session with ctx.agents.resume({session_id!r}) "
            f"(or load() it) instead of creating a new one with its id, or delete it first "
            f"(ctx.session_persistence.delete({session_id!r}))"
        )
        return SessionConflictError(msg, session_id=session_id, path=self._db.path)

    def __repr__(self) -> str:
        return f"<SqliteSessionStore {str(self._db.path)!r} following={len(self._followed)}>"


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
