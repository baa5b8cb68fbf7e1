"""The write path: one ``Journal`` per followed session, committed by the core's ``BatchWriter`` and
``UrgentWriter`` (``dsh_core.persistence``).

A journal buffers the events its session publishes (the ``session/event`` listener only appends
to a list) and commits them as one fenced statement (``Database.append``) at the end of a batch
window, at once for the records §9.1 makes durable without delay (``inbox/queued``,
``inbox/cleared``, and context injected while idle: ``dsh_core.persistence.is_urgent``; the ``UrgentWriter``'s threads
make that commit, without the event loop), or when the session is flushed. Every commit of a
journal runs whole in one thread under the journal's mutex, so they never overlap and never
overtake one another; the writer commits the journals of one window concurrently, as many as the
pool has connections.

Durability: a flush, a close and any commit holding an urgent record wait for the server's disk
(a synchronous commit). A batch window's commit does not (``synchronous_commit`` off for that
transaction): nothing was promised for it, and a flush that follows commits synchronously or, when
the window left nothing pending, takes a sync point, which waits for the WAL up to that moment
and so covers the window's commits too. So what a flush returning promises is unchanged, and a
window's commit no longer makes the turn-end flush wait out an extra fsync.

Failures:

* a failed statement (the server unreachable, a timeout) keeps the batch in memory and is retried
  at the next batch or flush; a flush that cannot commit everything raises ``SessionWriteError``.
  A commit whose answer was lost is recognised on retry and never written twice;
* a fenced write (another owner took the session over: ``SessionFencedError``) breaks the journal
  for good: nothing more is written, and every later flush raises the same error.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import psycopg

from dsh_core import SessionEvent

from ._codec import Pending, encoded
from ._database import Claim, Database
from ._errors import PersistenceError, SessionWriteError

if TYPE_CHECKING:
    from dsh_core import Session

__all__ = ["Journal"]

logger = logging.getLogger("dsh.persistence_postgres")

class Journal:
    """The stored log of one live session: buffered events, the owner epoch, the failure state."""

    __slots__ = (
        "broken",
        "closed",
        "db",
        "dirty",
        "epoch",
        "failure",
        "io",
        "limiter",
        "mutex",
        "pending",
        "queued",
        "session",
        "titled",
        "unsynced",
        "urgent",
        "written",
    )

    def __init__(self, session: Session, db: Database, limiter: anyio.CapacityLimiter) -> None:
        self.session = session
        self.db = db
        self.limiter = limiter
        #: events published but not yet committed, in log order, each with its line (``encode_line``)
        self.pending: list[Pending] = []
        #: queued on the writer's dirty list
        self.dirty = False
        #: the owner epoch this journal writes under (``None`` until the session is opened)
        self.epoch: int | None = None
        #: events committed (the stored count)
        self.written = 0
        #: the session row has its title
        self.titled = False
        #: the last failure, while the events it concerns are still uncommitted
        self.failure: psycopg.Error | None = None
        #: why this journal can no longer persist its session (sticky)
        self.broken: PersistenceError | None = None
        self.closed = False
        #: an urgent event (§9.1) is pending: the next commit is durable, whoever makes it
        self.urgent = False
        #: a commit not yet known to be on the server's disk was made (a batch window's)
        self.unsynced = False
        #: orders opening, writes and close on the event loop
        self.io = anyio.Lock()
        #: held by every commit, whatever thread makes it: commits never overlap or overtake
        self.mutex = threading.Lock()
        #: handed to the ``UrgentWriter``, whose commit has not taken the mutex yet
        self.queued = False

    @property
    def session_id(self) -> str:
        return self.session.id

    def opened(self, claim: Claim, snapshot: Sequence[SessionEvent]) -> None:
        """Adopt the owner epoch; what the stored log lacks of ``snapshot`` goes first.

        Takes ``mutex`` on the event loop: no commit holds it for long while ``epoch`` is unset.
        """
        with self.mutex:
            self.written, self.titled = claim.count, claim.titled
            self.pending[:0] = encoded(snapshot[claim.count :])
            self.epoch = claim.epoch

    def commit(self, *, durable: bool, final: bool = False, dequeue: bool = False) -> None:
        """Commit every pending event. Blocking (a worker thread or the urgent writer's); never raises:
        failures are recorded.

        The whole commit — taking the batch, the statement, and recording what was stored — runs
        under ``mutex``, so commits of one journal never overlap and none overtakes an earlier
        batch, whichever thread makes them, and none needs the event loop to finish (§9.1).

        ``durable``: return only once everything committed so far is on the server's disk (a flush,
        a close, or a batch holding an urgent event). A batch window's commit is not durable: it
        does not wait for the WAL's fsync; the next durable commit, or a ``sync_point`` when
        nothing is pending, covers it. ``final``: the close's commit; nothing is written after it.
        ``dequeue``: the ``UrgentWriter``'s commit; once it holds the mutex, an urgent event published
        from then on queues the journal again (one thread commits, at most one more waits for it).
        """
        with self.mutex:
            if dequeue:
                self.queued = False
            if self.closed:
                return
            self.closed = final
            pending = self.pending
            epoch = self.epoch
            if epoch is None or self.broken is not None:
                return
            # The listener appends to ``pending`` without the mutex (it must never wait for a commit):
            # appending to a list and deleting its head are atomic, and the flag is read before the
            # batch, so an urgent event that joins this batch keeps it set for one more durable commit.
            urgent, self.urgent = self.urgent, False
            if not pending:
                if (durable or urgent) and self.unsynced and not self._sync_point():
                    self.urgent = self.urgent or urgent
                return
            durable = durable or urgent
            batch = list(pending)
            first = batch[0][0].seq
            if first != self.written:
                # Never expected: the log would get a gap or a duplicate. Stop rather than write it.
                problem = f"event {first} arrived where event {self.written} was expected"
                self.broken = self.error(f"the write path lost its place ({problem}); nothing more is written")
                return
            try:
                titled = self.db.append(
                    self.session_id, epoch, self.written, batch, want_title=not self.titled, durable=durable
                )
            except PersistenceError as exc:  # fenced, or the stored log moved on: for good
                self.broken = exc
                logger.error("session %r: %s", self.session_id, exc)
                return
            except psycopg.Error as exc:
                self.urgent = self.urgent or urgent  # still pending: the retry must be durable too
                self._failed(exc, len(batch))
                return
            del pending[: len(batch)]
            self.written += len(batch)
            self.titled = self.titled or titled
            self.unsynced = not durable
            self._recovered()

    async def _commit(self, *, durable: bool, final: bool = False) -> None:
        """``commit`` in a worker thread (under ``io``)."""
        commit = functools.partial(self.commit, durable=durable, final=final)
        await anyio.to_thread.run_sync(commit, limiter=self.limiter)

    def _sync_point(self) -> bool:
        """Wait for the server's disk to hold every commit made so far; whether that worked."""
        try:
            self.db.sync_point()
        except psycopg.Error as exc:
            self._failed(exc, 0)
            return False
        self.unsynced = False
        self._recovered()
        return True

    def _failed(self, exc: psycopg.Error, events: int) -> None:
        if self.failure is None:
            logger.warning(
                "session %r: writing to %s failed: %s; %d events kept in memory, retried at the next "
                "batch or flush",
                self.session_id,
                self.db.target.name,
                self.db.target.redact(str(exc)),
                events,
            )
        self.failure = exc

    def _recovered(self) -> None:
        if self.failure is not None:
            logger.warning("session %r: writing to %s works again; nothing was lost", self.session_id, self.db.target.name)
            self.failure = None

    async def write(self) -> None:
        """Commit what is pending now (the writer's window; durable only for an urgent event). Never raises."""
        async with self.io:
            await self._commit(durable=False)

    def error(self, problem: str, *, cause: BaseException | None = None) -> SessionWriteError:
        error = SessionWriteError(
            f"session {self.session_id!r} on {self.db.target.name}: {problem}", session_id=self.session_id
        )
        error.__cause__ = cause
        return error

    def _raise_state(self) -> None:
        broken = self.broken
        if broken is not None:
            raise broken.with_traceback(None)  # the same error at every flush, without stacking tracebacks
        failure = self.failure
        if failure is not None and self.pending:
            problem = (
                f"writing the log failed: {self.db.target.redact(str(failure))}; {len(self.pending)} events "
                f"are not stored yet (they are kept in memory and retried at the next flush); nothing "
                f"already stored was changed"
            )
            raise self.error(problem, cause=None)
        if failure is not None and self.unsynced:
            problem = (
                f"waiting for the server to make the stored log durable failed: "
                f"{self.db.target.redact(str(failure))}; the last events were committed but may not be on "
                f"its disk yet (retried at the next flush)"
            )
            raise self.error(problem, cause=None)

    async def sync(self) -> None:
        """Commit everything pending: the session is durable (committed) when this returns.

        :raises SessionWriteError: naming the session and the server, when that is not so.
        :raises PersistenceError: the session could not be persisted (in use, conflict, fenced).
        """
        async with self.io:
            await self._commit(durable=True)
            self._raise_state()

    async def close(self) -> None:
        """Commit what is pending; idempotent; failures are logged. The caller releases the lock."""
        async with self.io:
            if self.closed:
                return
            await self._commit(durable=True, final=True)
            if self.pending and self.broken is None:
                logger.error(
                    "session %r: closing with %d events not stored on %s (%s)",
                    self.session_id,
                    len(self.pending),
                    self.db.target.name,
                    self.failure and self.db.target.redact(str(self.failure)),
                )

    def __repr__(self) -> str:
        state = "broken" if self.broken else "closed" if self.closed else "open" if self.epoch else "new"
        return f"<Journal {self.session_id!r} {state} epoch={self.epoch} written={self.written} pending={len(self.pending)}>"
