"""What a database backend's store shares (persistence-sqlite and persistence-postgres): a ``Journal``
per live session, and ``JournaledStore``, which follows live sessions and keeps ``load``'s reservation.

A journal buffers the rows its session publishes (the ``session/event`` listener encodes the event and
appends its row, nothing more) and commits them as one fenced write at the end of a batch window
(``BatchWriter``), at once for §9.1's records (``UrgentWriter``: through the last urgent record only;
what follows waits for its window), or when the session is flushed. Every commit runs whole under
the journal's mutex, in whatever thread makes it, so commits never overlap or overtake one another.

Durability: a flush, a close and any commit holding an urgent record are durable; a window's commit
need not be (``unsynced``): the next durable commit, or a ``sync_point`` when nothing is pending,
covers it. Failures: a failed commit (the backend's ``retryable`` errors) keeps the rows in memory for
the next batch or flush, and a flush that cannot commit everything raises ``SessionWriteError``; a
``PersistenceError`` (fenced: another owner took over) breaks the journal for good.

A backend supplies the blocking pieces (``encode``, ``seq_of``, ``append``, ``sync``) and, for the
store, its database (``claim``, ``listing``: ``ClaimingDatabase``) and how a session is owned, created
and read (the methods that raise ``NotImplementedError`` here).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import anyio
import anyio.to_thread
import attrs

from ._errors import PersistenceError, SessionConflictError, SessionInUseError, SessionWriteError
from ._rows import continues_log
from ._types import SessionInfo, StoredSession
from ._urgency import is_urgent
from ._writers import BatchWriter, UrgentWriter

if TYPE_CHECKING:
    from pathlib import Path

    from dsh_core.services.sessions import Session
    from dsh_core.session_log._event import SessionEvent

__all__ = ["ClaimingDatabase", "Journal", "JournaledStore", "OwnerClaim", "Reservation"]

logger = logging.getLogger("dsh.persistence")

RowT = TypeVar("RowT")
T = TypeVar("T")


class OwnerClaim(Protocol):
    """A session as a store took it over: its owner epoch, its stored count, whether it has a title."""

    @property
    def epoch(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def titled(self) -> bool: ...


ClaimT = TypeVar("ClaimT", bound=OwnerClaim)
ClaimT_co = TypeVar("ClaimT_co", bound=OwnerClaim, covariant=True)


class ClaimingDatabase(Protocol[ClaimT_co]):
    """What ``JournaledStore`` asks of a backend's database itself (blocking calls, run in ``_run``)."""

    def claim(self, session_id: str) -> ClaimT_co | None:
        """A new owner epoch for a stored session, recording this process as its holder (``None``: not stored)."""
        ...

    def listing(self) -> list[tuple[Any, ...]]:
        """Every session's ``(id, created, modified, cwd, parent_id, seed_length, events, turns, title)``,
        oldest first."""
        ...


class Journal(Generic[RowT]):
    """The stored log of one live session: buffered rows, the owner epoch, the failure state."""

    __slots__ = (
        "broken",
        "closed",
        "dirty",
        "epoch",
        "failure",
        "io",
        "limiter",
        "mutex",
        "path",
        "pending",
        "queued",
        "session",
        "titled",
        "unsynced",
        "urgent",
        "urgent_seq",
        "where",
        "written",
    )

    #: the driver's errors a commit survives (rows kept, retried at the next batch or flush)
    retryable: ClassVar[tuple[type[Exception], ...]] = ()
    #: a flush's ``SessionWriteError`` chains the driver's error (off when its text may hold a secret)
    chains_failure: ClassVar[bool] = True
    #: where the journal's warnings go (the backend's own logger)
    log: ClassVar[logging.Logger] = logger

    def __init__(
        self, session: Session, *, where: str, path: Path | None = None, limiter: anyio.CapacityLimiter | None = None
    ) -> None:
        self.session = session
        #: the store as messages name it ("in /x/sessions.db", "on user@host:5432/db")
        self.where = where
        self.path = path
        self.limiter = limiter
        #: rows published but not yet committed, in log order
        self.pending: list[RowT] = []
        #: queued on the writer's dirty list
        self.dirty = False
        #: the owner epoch this journal writes under (``None`` until the session is opened)
        self.epoch: int | None = None
        #: events committed (the stored count)
        self.written = 0
        #: the stored session has its title
        self.titled = False
        #: the last failure, while the rows it concerns are still uncommitted (or not durable)
        self.failure: Exception | None = None
        #: why this journal can no longer persist its session (sticky)
        self.broken: PersistenceError | None = None
        self.closed = False
        #: an urgent event (§9.1) is pending: the next commit is durable, whoever makes it
        self.urgent = False
        #: the seq of the last urgent event published: the ``UrgentWriter``'s commit stops there
        self.urgent_seq = -1
        #: a commit not yet durable was made (a batch window's)
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

    # ------------------------------------------------------------------ the backend's pieces

    def encode(self, event: SessionEvent) -> RowT:
        """``event`` as the row the backend stores (on the event loop: cheap)."""
        raise NotImplementedError

    def seq_of(self, row: RowT) -> int:
        raise NotImplementedError

    def append(self, epoch: int, first: int, rows: list[RowT], *, durable: bool) -> bool:
        """Commit ``rows`` (seqs from ``first``) fenced by ``epoch`` (blocking); whether the stored session
        has its title now. :raises PersistenceError: fenced, for good. :raises retryable:"""
        raise NotImplementedError

    def sync(self, epoch: int) -> None:
        """Make every commit so far durable (blocking). :raises PersistenceError: :raises retryable:"""
        raise NotImplementedError

    def describe(self, exc: Exception) -> str:
        """The driver's error as messages show it."""
        return str(exc)

    # ------------------------------------------------------------------ the write path

    def add(self, event: SessionEvent) -> None:
        """Buffer ``event``'s row (the listener)."""
        self.pending.append(self.encode(event))

    def opened(self, claim: OwnerClaim, snapshot: Sequence[SessionEvent]) -> None:
        """Adopt the owner epoch; what the stored log lacks of ``snapshot`` goes first."""
        rows = [self.encode(event) for event in snapshot[claim.count :]]
        with self.mutex:
            self.written, self.titled = claim.count, claim.titled
            self.pending[:0] = rows
            self.epoch = claim.epoch

    def commit(self, *, durable: bool, final: bool = False, dequeue: bool = False) -> None:
        """Commit the pending rows (blocking: a worker thread or the urgent writer's); never raises.

        ``final``: the close's commit. ``dequeue``: the ``UrgentWriter``'s, which commits through the last
        urgent record only (the rest waits for its window instead of being written while the loop runs);
        an urgent event published once it holds the mutex queues the journal again.
        """
        with self.mutex:
            if dequeue:
                self.queued = False
            if self.closed:
                return
            self.closed = final
            epoch = self.epoch
            if epoch is None or self.broken is not None:
                return
            # The listener appends to ``pending`` without the mutex: appending to a list and deleting its
            # head are atomic, and the flag is read before the batch is taken.
            urgent, self.urgent = self.urgent, False
            pending = self.pending
            batch = pending[: max(0, self.urgent_seq + 1 - self.written)] if dequeue else pending[:]
            if not batch:
                if (durable or urgent) and self.unsynced:
                    self._sync_point(epoch, urgent)
                return
            durable = durable or urgent
            first = self.seq_of(batch[0])
            if first != self.written:  # never expected: the log would get a gap or a duplicate
                problem = f"event {first} arrived where event {self.written} was expected"
                self.broken = self.error(f"the write path lost its place ({problem}); nothing more is written")
                return
            try:
                titled = self.append(epoch, first, batch, durable=durable)
            except PersistenceError as exc:  # fenced, or the stored log moved on: for good
                self.broken = exc
                self.log.error("session %r: %s", self.session_id, exc)
                return
            except self.retryable as exc:
                self.urgent = self.urgent or urgent  # still pending: the retry must be durable too
                self._failed(exc, len(batch))
                return
            del pending[: len(batch)]
            self.written += len(batch)
            self.titled = self.titled or titled
            self.unsynced = not durable
            self._recovered()

    def _sync_point(self, epoch: int, urgent: bool) -> None:
        try:
            self.sync(epoch)
        except PersistenceError as exc:
            self.broken = exc
            return
        except self.retryable as exc:
            self.urgent = self.urgent or urgent
            self._failed(exc, 0)
            return
        self.unsynced = False
        self._recovered()

    def _failed(self, exc: Exception, rows: int) -> None:
        if self.failure is None:
            self.log.warning(
                "session %r: writing %s failed: %s; %d events kept in memory, retried at the next batch or flush",
                self.session_id,
                self.where,
                self.describe(exc),
                rows,
            )
        self.failure = exc

    def _recovered(self) -> None:
        if self.failure is not None:
            self.log.warning("session %r: writing %s works again; nothing was lost", self.session_id, self.where)
            self.failure = None

    def error(self, problem: str, *, cause: BaseException | None = None) -> SessionWriteError:
        error = SessionWriteError(
            f"session {self.session_id!r} {self.where}: {problem}", session_id=self.session_id, path=self.path
        )
        error.__cause__ = cause
        return error

    def _raise_state(self) -> None:
        broken = self.broken
        if broken is not None:
            raise broken.with_traceback(None)  # the same error at every flush, without stacking tracebacks
        failure = self.failure
        if failure is None or not (self.pending or self.unsynced):
            return
        if self.pending:
            problem = (
                f"writing the log failed: {self.describe(failure)}; {len(self.pending)} events are not stored "
                f"yet (they are kept in memory and retried at the next flush); nothing already stored was changed"
            )
        else:
            problem = (
                f"making the stored log durable failed: {self.describe(failure)}; the last events were "
                f"committed but may not be on disk yet (retried at the next flush)"
            )
        raise self.error(problem, cause=failure if self.chains_failure else None)

    async def _commit(self, *, durable: bool, final: bool = False) -> None:
        commit = functools.partial(self.commit, durable=durable, final=final)
        await anyio.to_thread.run_sync(commit, limiter=self.limiter)

    async def write(self) -> None:
        """Commit what is pending now (the writer's window). Never raises."""
        async with self.io:
            await self._commit(durable=False)

    async def flush(self) -> None:
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
                failure = self.failure
                self.log.error(
                    "session %r: closing with %d events not stored %s (%s)",
                    self.session_id,
                    len(self.pending),
                    self.where,
                    failure and self.describe(failure),
                )

    def __repr__(self) -> str:
        state = "broken" if self.broken else "closed" if self.closed else "open" if self.epoch else "new"
        return f"<Journal {self.session_id!r} {state} epoch={self.epoch} written={self.written} pending={len(self.pending)}>"


@attrs.frozen
class Reservation(Generic[ClaimT]):
    """What ``load()`` leaves for the session that resumes the log: the epoch, and where the log ends."""

    claim: ClaimT
    #: the last stored event (``None`` for an empty log): the resumed session must hold it at ``count - 1``
    last: SessionEvent | None


JournalT = TypeVar("JournalT", bound=Journal[Any])


class JournaledStore(Generic[JournalT, ClaimT]):
    """Following live sessions and ``load``'s reservations, for a store of ``JournalT`` journals.

    Every session that enters the store is followed: the store owns it (its lock and a new owner epoch,
    storing it with its first events when it is new), then commits all it publishes. ``load`` keeps
    the lock and the epoch as a reservation for the session that resumes the log, so no other process
    slips in between; one nobody claims is released by ``release``, ``delete`` or when the plugin stops.
    """

    #: the plugin's name, as messages say it
    plugin: ClassVar[str] = ""
    #: where the store's warnings go (the backend's own logger)
    log: ClassVar[logging.Logger] = logger

    def __init__(
        self, database: ClaimingDatabase[ClaimT], batch_delay: float, *, concurrent: bool, urgent_threads: int
    ) -> None:
        self._database = database
        self._writer = BatchWriter(batch_delay, concurrent=concurrent)
        self._urgent = UrgentWriter(urgent_threads, name=f"dsh-{self.plugin}")
        self._followed: dict[str, JournalT] = {}
        self._reserved: dict[str, Reservation[ClaimT]] = {}
        self._closed = False
        self._late: set[str] = set()
        self._host = socket.gethostname()
        self._pid = os.getpid()

    # ------------------------------------------------------------------ the backend's pieces

    def _journal(self, session: Session) -> JournalT:
        raise NotImplementedError

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread; a driver error becomes a ``StoreUnavailableError``."""
        raise NotImplementedError

    async def _acquire(self, session_id: str) -> None:
        """Take the session's lock. :raises SessionInUseError: naming the holder."""
        raise NotImplementedError

    async def _release(self, session_id: str) -> None:
        raise NotImplementedError

    def _release_soon(self, session_id: str) -> None:
        """Give the lock back without waiting (a reservation dropped, a failed load)."""
        raise NotImplementedError

    async def _create(self, session: Session, snapshot: Sequence[SessionEvent]) -> ClaimT | tuple[int, SessionEvent | None]:
        """Store ``session`` with ``snapshot`` at epoch 1 (holding its lock): its claim, or, when it is
        stored already, ``(count, last stored event)``."""
        raise NotImplementedError

    async def _load_claimed(self, session_id: str, claim: ClaimT) -> tuple[ClaimT, StoredSession]:
        """Read the claimed session and store its crash repair (``loaded.repaired``, durably); the claim
        with the count stored now."""
        raise NotImplementedError

    def _not_found(self, session_id: str) -> PersistenceError:
        raise NotImplementedError

    def _conflict(self, session_id: str, count: int) -> SessionConflictError:
        raise NotImplementedError

    async def _stop(self) -> None:
        """After every journal is closed: give the locks back, close the database."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the service

    @property
    def batch_delay(self) -> float:
        return self._writer.delay

    def _refuse_live(self, session_id: str, doing: str) -> None:
        if session_id in self._followed:
            msg = (
                f"session {session_id!r} is in use by process {self._pid} on host {self._host} (this process: it "
                f"is live in this harness); dispose it before {doing}"
            )
            raise SessionInUseError(msg, session_id=session_id, host=self._host, pid=self._pid)

    def _check_open(self, what: str) -> None:
        if self._closed:
            msg = f"cannot {what}: the {self.plugin} plugin has stopped"
            raise PersistenceError(msg)

    @asynccontextmanager
    async def _owning(self, session_id: str, doing: str) -> AsyncIterator[None]:
        """Hold the session's lock (its reservation, or taken now) for ``doing``; given back after."""
        self._refuse_live(session_id, doing)
        if self._reserved.pop(session_id, None) is None:
            await self._acquire(session_id)
        try:
            yield
        finally:
            await self._release(session_id)

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
        if self._reserved.pop(session_id, None) is None:
            await self._acquire(session_id)
        try:
            claim = await self._run(self._database.claim, session_id)
            if claim is None:
                raise self._not_found(session_id)
            claim, loaded = await self._load_claimed(session_id, claim)
            if loaded.repaired:
                self.log.warning(
                    "session %r: the log ended inside a turn; closed it with %d repair events",
                    session_id,
                    len(loaded.repaired),
                )
        except BaseException:
            self._release_soon(session_id)
            raise
        if self._closed or session_id in self._followed:  # the plugin stopped, or a race: do not keep it
            self._release_soon(session_id)
        else:
            self._reserved[session_id] = Reservation(claim, loaded.events[-1] if loaded.events else None)
        return loaded

    def release(self, session_id: str) -> None:
        """Give up the reservation ``load`` kept, when the resume that was to follow failed (idempotent)."""
        if session_id in self._followed:
            return
        if self._reserved.pop(session_id, None) is not None:
            self._release_soon(session_id)

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every stored session, oldest first (by ``created``)."""
        self._check_open("list sessions")
        await self._writer.write_all()  # counts include what the live sessions published a moment ago
        rows = await self._run(self._database.listing)
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
                self.log.error("session %r: another live session with this id is already persisted", session_id)
            return
        journal = self._journal(session)
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
                self.log.error("session %r will not be persisted: %s", session_id, exc)
                return
            journal.opened(claim, snapshot)
        if self._followed.get(session_id) is not journal:  # disposed while opening
            await journal.close()
            await self._release(session_id)
        elif journal.urgent:  # an urgent event came while the session was opening
            self._urgent.submit(journal)
        elif journal.pending:
            self._writer.mark(journal)

    async def _open(
        self, session: Session, snapshot: Sequence[SessionEvent], reservation: Reservation[ClaimT] | None
    ) -> ClaimT:
        session_id = session.id
        if reservation is not None:
            count, last = reservation.claim.count, reservation.last
            if not continues_log(snapshot, count, last):
                self._release_soon(session_id)
                raise self._conflict(session_id, count)
            return reservation.claim
        await self._acquire(session_id)
        try:
            created = await self._create(session, snapshot)
            if not isinstance(created, tuple):
                return created
            count, last = created
            if not continues_log(snapshot, count, last):
                raise self._conflict(session_id, count)
            claim = await self._run(self._database.claim, session_id)
            if claim is None:  # deleted meanwhile: impossible while we hold the lock
                raise self._not_found(session_id)
            return claim
        except BaseException:
            await self._release(session_id)
            raise

    def _live(self, session: Session) -> JournalT | None:
        journal = self._followed.get(session.id)
        return journal if journal is not None and journal.session is session else None

    def problem_of(self, session: Session) -> PersistenceError | None:
        """Why ``session`` is not being persisted (in use, conflicting log, the database), or ``None``."""
        journal = self._live(session)
        return None if journal is None else journal.broken

    def publish(self, session: Session, event: SessionEvent) -> None:
        """The ``session/event`` listener: buffer the event's row, wake a writer. Cheap."""
        journal = self._live(session)
        if journal is None:
            if self._closed and session.id not in self._late:
                self._late.add(session.id)
                self.log.warning(
                    "session %r: events published after the %s plugin stopped are not stored", session.id, self.plugin
                )
            return
        if journal.broken is not None:
            return
        journal.add(event)
        if is_urgent(session, event):
            journal.urgent_seq = event.seq
            journal.urgent = True  # its commit is durable, whichever write makes it (§9.1)
            if journal.epoch is not None:
                self._urgent.submit(journal)  # committed now by a thread of ours: the loop may stay busy
        elif not journal.dirty:
            self._writer.mark(journal)

    async def flush(self, session: Session) -> None:
        """The ``session/flush`` listener: everything published so far is committed, durably.

        :raises SessionWriteError: naming the session and the store, when it is not.
        :raises PersistenceError: the session could not be persisted at all (in use, conflict, fenced).
        """
        journal = self._live(session)
        if journal is not None:
            await journal.flush()

    async def unfollow(self, session: Session) -> None:
        """The ``session/disposed`` listener: commit what is pending, then give the session up."""
        journal = self._live(session)
        if journal is None:
            return
        del self._followed[session.id]
        await journal.close()
        if journal.epoch is not None:
            await self._release(session.id)

    async def run_writer(self) -> None:
        """The background writer task (one per plugin)."""
        await self._writer.run()

    async def close(self) -> None:
        """The plugin stops: commit every followed session, then give every session back."""
        self._closed = True
        journals = list(self._followed.values())
        self._followed.clear()
        async with anyio.create_task_group() as tg:  # concurrently: a failing store costs one timeout
            for journal in journals:
                tg.start_soon(journal.close)
        self._reserved.clear()
        await anyio.to_thread.run_sync(self._urgent.stop)  # the journals are closed: its threads end now
        await self._stop()

