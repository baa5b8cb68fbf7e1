"""The ``session_persistence`` service: load (with crash repair), read, exists, list, delete, repair;
and following live sessions.

Following live sessions and ``load``'s reservation are the core's ``JournaledStore``
(``dsh_core.persistence``); this module gives it PostgreSQL's pieces: the advisory locks (``Owners``),
creating, claiming, reading, repairing and listing sessions.

Queries run in worker threads (``anyio.to_thread``), at most as many at once as the pool has
connections; the commits of urgent records run in the ``UrgentWriter``'s threads, without the
event loop (§9.1).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, TypeVar

import anyio
import anyio.to_thread
import attrs
import psycopg

from dsh_core import SessionEvent, SessionMeta, StoredLogError, repair_events
from dsh_core.persistence import JournaledStore, StoredSession

from ._codec import check_events, encoded
from ._database import Claim, Database, not_found
from ._errors import DatabaseError, SessionConflictError, SessionCorruptError, SessionNotFoundError
from ._owners import Owners
from ._types import LoadedSession, RepairReport
from ._writer import Journal

if TYPE_CHECKING:
    from dsh_core import Session

__all__ = ["PostgresSessionStore"]

logger = logging.getLogger("dsh.persistence_postgres")

T = TypeVar("T")


class PostgresSessionStore(JournaledStore[Journal, Claim]):
    """The ``session_persistence`` service of the ``persistence-postgres`` plugin (see its docs)."""

    log: ClassVar[logging.Logger] = logger
    plugin: ClassVar[str] = "persistence-postgres"

    def __init__(self, db: Database, batch_delay: float, *, connections: int) -> None:
        super().__init__(db, batch_delay, concurrent=True, urgent_threads=connections)
        self._db = db
        self._limiter = anyio.CapacityLimiter(connections)
        self._owners = Owners(db, self._run)

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the tables."""
        return self._db.schema

    @property
    def server(self) -> str:
        """The server as messages name it (``user@host:port/dbname``; never the password)."""
        return self._db.target.name

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

    # ------------------------------------------------------------------ the base's pieces

    def _journal(self, session: Session) -> Journal:
        return Journal(session, self._db, self._limiter)

    async def _acquire(self, session_id: str) -> None:
        await self._owners.acquire(session_id)

    async def _release(self, session_id: str) -> None:
        await self._owners.release(session_id)

    def _release_soon(self, session_id: str) -> None:
        self._owners.release_soon(session_id)

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return not_found(session_id)

    async def _stop(self) -> None:
        self._owners.forget()  # the locks go with the lock connection
        await anyio.to_thread.run_sync(self._db.close)

    async def _load_claimed(self, session_id: str, claim: Claim) -> tuple[Claim, StoredSession]:
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
        return attrs.evolve(claim, count=len(loaded.events)), loaded

    async def _create(self, session: Session, snapshot: Sequence[SessionEvent]) -> Claim | tuple[int, SessionEvent | None]:
        return await self._run(
            functools.partial(
                self._db.create, session.id, created=time.time(), meta=session.meta.to_json(), events=snapshot
            )
        )

    # ------------------------------------------------------------------ the service

    async def exists(self, session_id: str) -> bool:
        """Whether a session is stored under ``session_id``."""
        self._check_open("look up a session")
        return await self._run(self._db.exists, session_id)

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
        async with self._owning(session_id, "repairing it"):
            done = await self._run(self._db.repair, session_id)
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

    async def delete(self, session_id: str) -> None:
        """Remove the stored session: its row and every event row, in one transaction.

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: the session is live here or held by another process.
        """
        self._check_open("delete a session")
        async with self._owning(session_id, "deleting it"):
            if not await self._run(self._db.delete, session_id):
                raise not_found(session_id)

    def _conflict(self, session_id: str, count: int) -> SessionConflictError:
        msg = (
            f"session {session_id!r} cannot be persisted to {self._db.target.name} (schema "
            f"{self._db.schema!r}): its {count} stored events are not the start of this session's log. "
            f"Resume the stored session with ctx.agents.resume({session_id!r}) (or load() it) instead of "
            f"creating a new one with its id, or delete it first (ctx.session_persistence.delete({session_id!r}))"
        )
        return SessionConflictError(msg, session_id=session_id)

    async def run_releases(self) -> None:
        """The background task that gives back the locks ``release()`` let go of."""
        await self._owners.run()

    def __repr__(self) -> str:
        return f"<PostgresSessionStore {self.server} schema={self.schema!r} following={len(self._followed)}>"
