"""The write path: one ``Journal`` per followed session, and the background ``BatchWriter``.

A journal buffers the events its session publishes (the ``session/event`` listener appends to a
list) and writes them as one ``os.write`` of complete lines, at the end of a batch window or when
the session is flushed. Only the event-loop thread writes, and a write has no ``await`` inside
it, so batches never interleave; ``fsync`` runs in a worker thread under the journal's lock,
which also orders it against ``close``.

Urgent events (SPEC §9.1: an accepted send or steer, a cancel's ``inbox/cleared``, context
injected while idle; ``dsh_core.persistence.is_urgent``) skip the window, whatever ``batch_delay`` is: the listener
writes the journal's pending events at once, inside the ``append`` that published them, so
they are in the OS's hands before ``send()`` returns and survive the process being killed; and
the writer's sync loop starts their fsync at once, so they survive a power loss moments later.

Failures:

* a failed write (``ENOSPC``, ``EDQUOT``, ``EIO``...) keeps the batch in memory, cuts off whatever
  part of it reached the file (so the next write starts on a line boundary), and is retried at the
  next batch or flush; a flush that cannot write everything raises ``SessionWriteError``;
* a failed ``fsync`` breaks the journal for good: the kernel may have dropped the unwritten pages
  and cleared the error, so a retry could report success for lost data. Every later flush raises.

Lines already in the file are never rewritten or truncated.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import anyio
import attrs

from dsh_core import SessionEvent

from ._errors import PersistenceError, SessionConflictError, SessionWriteError
from ._format import Header, encode_event, encode_header
from ._layout import LOCK_NAME, TEMP_PREFIX
from ._loader import parse_log
from ._lock import SessionLock

if TYPE_CHECKING:
    from dsh_core.services.sessions import Session

__all__ = ["BatchWriter", "Journal", "Reservation", "fsync_dir", "sync_file"]

logger = logging.getLogger("dsh.persistence_jsonl")

@attrs.frozen
class Reservation:
    """What ``load()`` leaves for the session that resumes the log: the lock, and where the log ends."""

    lock: SessionLock
    #: events in the stored log, repairs included
    count: int
    #: the last of them (``None`` for an empty log): the resumed session must hold it at ``count - 1``
    last: SessionEvent | None
    #: bytes in the file
    size: int


@attrs.frozen
class _Opened:
    fd: int
    lock: SessionLock
    written: int
    size: int


def sync_file(fd: int) -> None:
    """Make what was written to ``fd`` durable.

    ``fsync``; on macOS ``F_FULLFSYNC``, since its ``fsync`` leaves the data in the drive's cache.
    """
    if sys.platform == "darwin":
        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sync_file(fd)
    finally:
        os.close(fd)


def _describe(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


class Journal:
    """The stored log of one live session: buffered events, the open file, durability state."""

    __slots__ = (
        "broken",
        "closed",
        "dirty",
        "durable_soon",
        "failure",
        "fd",
        "io",
        "lock",
        "path",
        "pending",
        "session",
        "size",
        "synced",
        "written",
    )

    def __init__(self, session: Session, path: Path) -> None:
        self.session = session
        self.path = path
        #: events published but not yet written, in log order
        self.pending: list[SessionEvent] = []
        #: queued on the writer's dirty list
        self.dirty = False
        #: an urgent event waits for its fsync (on the writer's sync list, or for the file to open)
        self.durable_soon = False
        self.fd: int | None = None
        self.lock: SessionLock | None = None
        #: events in the file, and bytes of complete lines in it
        self.written = 0
        self.size = 0
        #: ``size`` at the last successful fsync
        self.synced = 0
        #: the last write failure, while the events it concerns are still unwritten
        self.failure: OSError | None = None
        #: why this journal can no longer persist its session (sticky)
        self.broken: PersistenceError | None = None
        self.closed = False
        #: orders open, fsync and close
        self.io = anyio.Lock()

    @property
    def session_id(self) -> str:
        return self.session.id

    # ------------------------------------------------------------------ opening (worker thread)

    def open_blocking(
        self, snapshot: Sequence[SessionEvent], reservation: Reservation | None, header: Header
    ) -> _Opened:
        """Lock the folder and open the log for appending, creating it atomically if it is new.

        A new log is written whole — the header and ``snapshot`` — to a temp file, fsynced and
        renamed into place, so it exists complete or not at all. An existing log must be the one
        ``snapshot`` continues (checked cheaply through ``reservation``, else by parsing it).
        Runs in a worker thread and touches nothing shared.
        """
        folder = self.path.parent
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            fsync_dir(folder.parent)
        lock = (
            reservation.lock
            if reservation is not None
            else SessionLock.acquire(folder / LOCK_NAME, self.session_id)
        )
        try:
            if not self.path.exists():
                written, size = self._create_blocking(folder, snapshot, header)
            else:
                written, size = self._check_continues(snapshot, reservation)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except BaseException:
            lock.release()
            raise
        return _Opened(fd, lock, written, size)

    def _create_blocking(
        self, folder: Path, snapshot: Sequence[SessionEvent], header: Header
    ) -> tuple[int, int]:
        for stale in folder.glob(f"{TEMP_PREFIX}*"):  # a creation that crashed; we hold the lock
            stale.unlink(missing_ok=True)
        data = encode_header(header) + b"".join(encode_event(event) for event in snapshot)
        temp = folder / f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                sync_file(fd)
            finally:
                os.close(fd)
            os.rename(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        fsync_dir(folder)
        return len(snapshot), len(data)

    def _check_continues(
        self, snapshot: Sequence[SessionEvent], reservation: Reservation | None
    ) -> tuple[int, int]:
        if reservation is not None:
            count, last, size = reservation.count, reservation.last, reservation.size
            torn = 0  # load() has repaired the log
        else:
            stored = parse_log(self.path, self.path.read_bytes())
            if stored.header.id != self.session_id:
                self._conflict(f"it holds session {stored.header.id!r}")
            count = len(stored.events)
            last = stored.events[-1] if stored.events else None
            size, torn = stored.valid_size, stored.torn
        if count > len(snapshot) or (last is not None and snapshot[count - 1] != last):
            self._conflict(f"its {count} stored events are not the start of this session's log")
        if torn:
            # This session holds every stored event; only a torn tail follows them: drop it.
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.ftruncate(fd, size)
                sync_file(fd)
            finally:
                os.close(fd)
        return count, size

    def _conflict(self, problem: str) -> NoReturn:
        sid = self.session_id
        msg = (
            f"session {sid!r} cannot be persisted to {self.path}: {problem}. Resume the stored session "
            f"with ctx.agents.resume({sid!r}) (or load() it) instead of creating a new one with its id, "
            f"or delete it first (ctx.session_persistence.delete({sid!r}))"
        )
        raise SessionConflictError(msg, session_id=sid, path=self.path)

    def opened(self, opened: _Opened, snapshot: Sequence[SessionEvent]) -> None:
        """Adopt the result of ``open_blocking``: what the file lacks of ``snapshot`` goes first."""
        self.fd, self.lock = opened.fd, opened.lock
        self.written, self.size, self.synced = opened.written, opened.size, opened.size
        self.pending[:0] = snapshot[opened.written :]

    # ------------------------------------------------------------------ writing (event-loop thread)

    def drain(self) -> None:
        """Write every pending event now, as one write of complete lines. Never raises.

        A failure is recorded (``failure``, or ``broken``) and the events stay pending.
        """
        fd = self.fd
        pending = self.pending
        if fd is None or not pending or self.broken is not None:
            return
        if pending[0].seq != self.written:
            # Never expected: the log would get a gap or a duplicate. Stop rather than write it.
            problem = f"event {pending[0].seq} arrived where event {self.written} was expected"
            self.broken = self.error(f"the write path lost its place ({problem}); nothing more is written")
            return
        try:
            data = b"".join([encode_event(event) for event in pending])
        except (TypeError, ValueError) as exc:  # frozen events always encode; a bug must not stop the writer
            self.broken = self.error(
                f"an event could not be encoded ({exc!r}); nothing more is written", cause=exc
            )
            return
        done = 0
        try:
            done = os.write(fd, data)  # one write of complete lines
            while done < len(data):  # a short write: the rest, then the error that cut it short
                done += os.write(fd, memoryview(data)[done:])
        except OSError as exc:
            self._write_failed(fd, exc, done)
            return
        self.pending = []
        self.written += len(pending)
        self.size += len(data)
        if self.failure is not None:
            logger.warning("session %r: writing %s works again; nothing was lost", self.session_id, self.path)
            self.failure = None

    def _write_failed(self, fd: int, exc: OSError, done: int) -> None:
        if done:
            try:  # cut off the partial batch so that the next write starts on a line boundary
                os.ftruncate(fd, self.size)
            except OSError as undo:
                self.broken = self.error(
                    f"a write was cut short ({_describe(exc)}) and its partial line could not be removed "
                    f"({_describe(undo)}); nothing more is written. The next load drops that torn line",
                    cause=exc,
                )
                return
        if self.failure is None:
            logger.warning(
                "session %r: writing %s failed: %s; %d events kept in memory, retried at the next "
                "batch or flush",
                self.session_id,
                self.path,
                _describe(exc),
                len(self.pending),
            )
        self.failure = exc

    def error(self, problem: str, *, cause: BaseException | None = None) -> SessionWriteError:
        error = SessionWriteError(
            f"session {self.session_id!r}: {self.path}: {problem}", session_id=self.session_id, path=self.path
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
                f"writing the log failed: {_describe(failure)}; {len(self.pending)} events are not "
                f"stored yet (they are kept in memory and retried at the next flush); nothing already "
                f"stored was changed"
            )
            raise self.error(problem, cause=failure)

    async def sync(self) -> None:
        """Write everything pending and fsync it: the session is durable when this returns.

        :raises SessionWriteError: naming the session and the file, when that is not so.
        :raises PersistenceError: the journal could not be opened (in use, conflict).
        """
        async with self.io:
            self.drain()
            self._raise_state()
            fd = self.fd
            if fd is None or self.synced >= self.size:
                return
            target = self.size
            try:
                await anyio.to_thread.run_sync(sync_file, fd)
            except OSError as exc:
                self.broken = self.error(
                    f"fsync failed: {_describe(exc)}; events written since the last successful flush may "
                    f"be lost and this session is no longer persisted. Load the stored log to go on",
                    cause=exc,
                )
                self._raise_state()
            self.synced = max(self.synced, target)

    async def close(self) -> None:
        """Write, fsync and close the file and release the lock. Idempotent; failures are logged."""
        async with self.io:
            if self.closed:
                return
            self.closed = True
            try:
                self.drain()
                fd = self.fd
                if fd is not None and self.broken is None and self.synced < self.size:
                    try:
                        await anyio.to_thread.run_sync(sync_file, fd)
                        self.synced = self.size
                    except OSError as exc:
                        self.broken = self.error(f"fsync failed at close: {_describe(exc)}", cause=exc)
                if self.broken is not None or self.pending:
                    why = self.broken or (self.failure and _describe(self.failure))
                    logger.error(
                        "session %r: closing %s with %d events not stored, or not durable (%s)",
                        self.session_id,
                        self.path,
                        len(self.pending),
                        why,
                    )
            finally:
                fd, self.fd = self.fd, None
                lock, self.lock = self.lock, None
                if fd is not None:
                    os.close(fd)
                if lock is not None:
                    lock.release()

    def __repr__(self) -> str:
        state = (
            "broken" if self.broken else "closed" if self.closed else "open" if self.fd is not None else "new"
        )
        return f"<Journal {self.session_id!r} {state} written={self.written} pending={len(self.pending)}>"


class BatchWriter:
    """The background writer: the first pending event opens a window of ``delay`` seconds, then
    every journal with pending events is written (one write per file). Urgent events skip the
    window: written at once by ``urgent``, fsynced at once by the sync loop."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._dirty: list[Journal] = []
        self._wake = anyio.Event()
        self._armed = False
        self._to_sync: list[Journal] = []
        self._sync_wake = anyio.Event()

    def urgent(self, journal: Journal) -> None:
        """Write ``journal``'s pending events now and have them fsynced at once (see the module docstring).

        Called from the ``session/event`` listener: one ``write``, no waiting. Before the file is
        open the events wait in ``pending``, and ``follow`` calls this again once it is.
        """
        journal.drain()
        if journal.fd is None or journal.durable_soon:
            journal.durable_soon = True
            return
        journal.durable_soon = True
        self._to_sync.append(journal)
        self._sync_wake.set()

    def mark(self, journal: Journal) -> None:
        """``journal`` has pending events (called from the ``session/event`` listener: cheap)."""
        journal.dirty = True
        self._dirty.append(journal)
        if not self._armed:
            self._armed = True
            self._wake.set()

    def drain_all(self) -> None:
        """Write every marked journal now (no fsync)."""
        dirty, self._dirty = self._dirty, []
        for journal in dirty:
            journal.dirty = False
            journal.drain()

    async def run(self) -> None:
        """Write batches and fsync urgent events until cancelled (the plugin stops; it drains and
        fsyncs what is left itself)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._sync_urgent)
            await self._write_batches()

    async def _sync_urgent(self) -> None:
        while True:
            await self._sync_wake.wait()
            self._sync_wake = anyio.Event()
            journals, self._to_sync = self._to_sync, []
            for journal in journals:
                journal.durable_soon = False
                try:
                    await journal.sync()
                except PersistenceError as exc:  # the caller's next flush raises it too
                    logger.warning("session %r: an urgent fsync failed: %s", journal.session_id, exc)

    async def _write_batches(self) -> None:
        while True:
            await self._wake.wait()
            await anyio.sleep(self.delay)
            # Events published from here on wake the next window.
            self._wake = anyio.Event()
            self._armed = False
            self.drain_all()
