"""The write path: one ``Journal`` per followed session, committed by the core's ``BatchWriter`` (the
window, one journal after the other: SQLite has one writer at a time) and ``UrgentWriter`` (§9.1).

A journal buffers the rows its session publishes (the ``session/event`` listener encodes the event
and appends its row to a list, nothing more) and commits them as one fenced transaction
(``Database.append``) at the end of a batch window, when the session is flushed, or at once for
§9.1's urgent records (``dsh_core.persistence.is_urgent``): the ``UrgentWriter``'s threads make
that commit without the event loop, so an accepted send is stored even when the application never
gives its loop control again before it is killed. Every commit of a journal runs whole under the
journal's mutex, so commits never overlap or overtake one another, whichever thread makes them.

Durability: a flush, a close and any commit holding an urgent record are durable (``synchronous =
FULL``: the WAL is fsynced before the commit returns). A batch window's commit is not (``NORMAL``:
written to the WAL, in the OS's hands, so it survives the process being killed): nothing was
promised for it, and the next durable commit, or a ``sync_point`` when the window left nothing
pending, fsyncs the WAL and so covers it too.

Failures: a failed commit (the database busy past its timeout, a full disk, an I/O error) keeps the
rows in memory and is retried at the next batch or flush; a flush that cannot commit everything
raises ``SessionWriteError``. A fenced write (``SessionFencedError``) breaks the journal for good:
nothing more is written, and every later flush raises that error.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread

from dsh_core.persistence import PersistenceError, SessionWriteError, title_of
from dsh_core.session_log import UserMessageEvent

from ._database import Claim, Database
from ._rows import Row, turns_in

if TYPE_CHECKING:
    from dsh_core import Session, SessionEvent

__all__ = ["Journal"]

logger = logging.getLogger("dsh.persistence_sqlite")

_USER_MESSAGE: Final = UserMessageEvent.type


class Journal:
    """The stored log of one live session: buffered rows, the owner epoch, the failure state."""

    __slots__ = (
        "broken",
        "closed",
        "db",
        "dirty",
        "epoch",
        "failure",
        "io",
        "mutex",
        "pending",
        "queued",
        "session",
        "title",
        "titled",
        "unsynced",
        "urgent",
        "urgent_seq",
        "written",
    )

    def __init__(self, session: Session, db: Database) -> None:
        self.session = session
        self.db = db
        #: rows published but not yet committed, in log order
        self.pending: list[Row] = []
        #: queued on the writer's dirty list
        self.dirty = False
        #: the owner epoch this journal writes under (``None`` until the session is opened)
        self.epoch: int | None = None
        #: events committed (the stored count)
        self.written = 0
        #: the stored session has its title; ``title`` is the one published since, to store
        self.titled = False
        self.title: str | None = None
        #: the last failure, while the rows it concerns are still uncommitted
        self.failure: sqlite3.Error | None = None
        #: why this journal can no longer persist its session (sticky)
        self.broken: PersistenceError | None = None
        self.closed = False
        #: an urgent event (§9.1) is pending: the next commit is durable, whoever makes it
        self.urgent = False
        #: the seq of the last urgent event published: the ``UrgentWriter``'s commit stops there
        self.urgent_seq = -1
        #: a commit not yet fsynced was made (a batch window's)
        self.unsynced = False
        #: orders opening, writes and close on the event loop
        self.io = anyio.Lock()
        #: held by every commit, whatever thread makes it
        self.mutex = threading.Lock()
        #: handed to the ``UrgentWriter``, whose commit has not taken the mutex yet
        self.queued = False

    @property
    def session_id(self) -> str:
        return self.session.id

    def add(self, event: SessionEvent, row: Row) -> None:
        """Buffer ``row`` (the listener; cheap): a title is read from the first prompt only."""
        self.pending.append(row)
        if not self.titled and self.title is None and event.type == _USER_MESSAGE:
            self.title = title_of(event)

    def opened(self, claim: Claim, rows: list[Row]) -> None:
        """Adopt the owner epoch; ``rows`` (what the stored log lacks of the session) go first."""
        with self.mutex:
            self.written, self.titled = claim.count, claim.titled
            self.pending[:0] = rows
            self.epoch = claim.epoch

    def commit(self, *, durable: bool, final: bool = False, dequeue: bool = False) -> None:
        """Commit every pending row (blocking: a worker thread or the urgent writer's). Never raises:
        failures are recorded. See the module docstring for ``durable``; ``final`` is the close's
        commit; ``dequeue`` the ``UrgentWriter``'s (an urgent event published once it holds the mutex
        queues the journal again)."""
        with self.mutex:
            if dequeue:
                self.queued = False
            if self.closed:
                return
            self.closed = final
            epoch = self.epoch
            if epoch is None or self.broken is not None:
                return
            # The listener appends to ``pending`` without the mutex: appending to a list and deleting
            # its head are atomic, and the flag is read before the batch is taken.
            urgent, self.urgent = self.urgent, False
            pending = self.pending
            # The urgent writer commits through the last urgent record only: what the loop published
            # after it waits for its window, instead of being inserted while the loop runs (the
            # threads would trade the GIL row by row).
            batch = pending[: max(0, self.urgent_seq + 1 - self.written)] if dequeue else pending[:]
            if not batch:
                if (durable or urgent) and self.unsynced:
                    self._sync_point(epoch, urgent)
                return
            durable = durable or urgent
            first = batch[0][1]
            if first != self.written:  # never expected: the log would get a gap or a duplicate
                problem = f"event {first} arrived where event {self.written} was expected"
                self.broken = self.error(f"the write path lost its place ({problem}); nothing more is written")
                return
            title = None if self.titled else self.title
            try:
                self.db.append(
                    self.session_id, epoch, first, batch, turns=turns_in(batch), title=title, durable=durable
                )
            except PersistenceError as exc:  # fenced, or the stored log moved on: for good
                self.broken = exc
                logger.error("session %r: %s", self.session_id, exc)
                return
            except sqlite3.Error as exc:
                self.urgent = self.urgent or urgent  # still pending: the retry must be durable too
                self._failed(exc, len(batch))
                return
            del pending[: len(batch)]
            self.written += len(batch)
            self.titled = self.titled or title is not None
            self.unsynced = not durable
            self._recovered()

    def _sync_point(self, epoch: int, urgent: bool) -> None:
        try:
            self.db.sync_point(self.session_id, epoch)
        except PersistenceError as exc:
            self.broken = exc
            return
        except sqlite3.Error as exc:
            self.urgent = self.urgent or urgent
            self._failed(exc, 0)
            return
        self.unsynced = False
        self._recovered()

    def _failed(self, exc: sqlite3.Error, rows: int) -> None:
        if self.failure is None:
            logger.warning(
                "session %r: writing to %s failed: %s; %d events kept in memory, retried at the next batch or flush",
                self.session_id,
                self.db.path,
                exc,
                rows,
            )
        self.failure = exc

    def _recovered(self) -> None:
        if self.failure is not None:
            logger.warning("session %r: writing to %s works again; nothing was lost", self.session_id, self.db.path)
            self.failure = None

    def error(self, problem: str, *, cause: BaseException | None = None) -> SessionWriteError:
        error = SessionWriteError(
            f"session {self.session_id!r} in {self.db.path}: {problem}", session_id=self.session_id, path=self.db.path
        )
        error.__cause__ = cause
        return error

    def _raise_state(self) -> None:
        broken = self.broken
        if broken is not None:
            raise broken.with_traceback(None)  # the same error at every flush, without stacking tracebacks
        failure = self.failure
        if failure is not None and (self.pending or self.unsynced):
            problem = (
                f"writing the log failed: {failure}; {len(self.pending)} events are not stored yet, or the last "
                f"ones not durable (they are kept in memory and retried at the next flush); nothing already "
                f"stored was changed"
            )
            raise self.error(problem, cause=failure)

    async def _commit(self, *, durable: bool, final: bool = False) -> None:
        await anyio.to_thread.run_sync(lambda: self.commit(durable=durable, final=final))

    async def write(self) -> None:
        """Commit what is pending now (the writer's window). Never raises."""
        async with self.io:
            await self._commit(durable=False)

    async def sync(self) -> None:
        """Commit everything pending, durably. :raises SessionWriteError: :raises PersistenceError:"""
        async with self.io:
            await self._commit(durable=True)
            self._raise_state()

    async def close(self) -> None:
        """Commit what is pending, durably; idempotent; failures are logged. The caller releases the lock."""
        async with self.io:
            if self.closed:
                return
            await self._commit(durable=True, final=True)
            if self.pending and self.broken is None:
                logger.error(
                    "session %r: closing with %d events not stored in %s (%s)",
                    self.session_id,
                    len(self.pending),
                    self.db.path,
                    self.failure,
                )

    def __repr__(self) -> str:
        state = "broken" if self.broken else "closed" if self.closed else "open" if self.epoch else "new"
        return f"<Journal {self.session_id!r} {state} epoch={self.epoch} written={self.written} pending={len(self.pending)}>"
