"""The write path: one ``Journal`` per followed session (``dsh_core.persistence.Journal``, committed by the
core's ``BatchWriter``, the journals of one window concurrently, as many as the pool has connections,
and ``UrgentWriter`` for §9.1's records); what is PostgreSQL's here is the row (the event with its
line, ``encode_line``) and the fenced statement (``Database.append``).

Durability: a flush, a close and any commit holding an urgent record wait for the server's disk
(a synchronous commit). A batch window's commit does not (``synchronous_commit`` off for that
transaction): nothing was promised for it, and a flush that follows commits synchronously or, when
the window left nothing pending, takes a sync point, which waits for the WAL up to that moment
and so covers the window's commits too. So what a flush returning promises is unchanged, and a
window's commit no longer makes the turn-end flush wait out an extra fsync.

Failures: a failed statement (the server unreachable, a timeout) keeps the batch in memory and is
retried at the next batch or flush; a commit whose answer was lost is recognised on retry and never
written twice. Messages show the server's errors redacted (``target.redact``), and a flush's error
does not chain them (their text may hold the DSN).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

import psycopg

from dsh_core.persistence import Journal as BaseJournal

from ._codec import Pending, encode_line
from ._database import Database

if TYPE_CHECKING:
    import anyio

    from dsh_core import Session, SessionEvent

__all__ = ["Journal"]


class Journal(BaseJournal[Pending]):
    """The stored log of one live session on the server."""

    __slots__ = ("db",)

    log: ClassVar[logging.Logger] = logging.getLogger("dsh.persistence_postgres")
    retryable: ClassVar[tuple[type[Exception], ...]] = (psycopg.Error,)
    chains_failure: ClassVar[bool] = False

    def __init__(self, session: Session, db: Database, limiter: anyio.CapacityLimiter) -> None:
        super().__init__(session, where=f"on {db.target.name}", limiter=limiter)
        self.db = db

    def encode(self, event: SessionEvent) -> Pending:
        return (event, encode_line(event))

    def seq_of(self, row: Pending) -> int:
        return row[0].seq

    def append(self, epoch: int, first: int, rows: list[Pending], *, durable: bool) -> bool:
        return self.db.append(self.session_id, epoch, first, rows, want_title=not self.titled, durable=durable)

    def sync(self, epoch: int) -> None:
        del epoch  # the server's WAL is one for every session
        self.db.sync_point()

    def describe(self, exc: Exception) -> str:
        return self.db.target.redact(str(exc))
