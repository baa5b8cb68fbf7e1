"""The ``session_persistence`` service: load (with crash repair), read, exists, list, delete, repair;
and following live sessions.

Every session that enters the store is *followed*: its log file is created (or reopened, when it
resumes a stored log) and every event it publishes is written by the ``BatchWriter``. ``load``
takes the session's lock and keeps it as a *reservation* for the session that resumes the log,
so no other process can slip in between the load and the resume. A reservation nobody claims
is released by ``delete`` or when the plugin stops.

Blocking file work (parsing, creating, listing, deleting, fsync) runs in worker threads.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import attrs

from dsh_core import SessionEvent
from dsh_core.persistence import is_urgent

from ._errors import (
    PersistenceError,
    SessionAccessError,
    SessionConflictError,
    SessionInUseError,
    SessionNotFoundError,
)
from ._format import Header, encode_event
from ._layout import BACKUP_PREFIX, LOCK_NAME, LOG_NAME, TEMP_PREFIX, Layout
from ._loader import parse_log, repair_events, summarize_log
from ._lock import SessionLock
from ._repair import cut_damaged
from ._types import LoadedSession, RepairReport, SessionInfo
from ._writer import BatchWriter, Journal, Reservation, fsync_dir, sync_file

if TYPE_CHECKING:
    from dsh_core.services.sessions import Session

__all__ = ["JsonlSessionStore"]

logger = logging.getLogger("dsh.persistence_jsonl")


@attrs.define
class _Held:
    """What a worker thread acquired, so that a cancelled caller can still let go of it."""

    lock: SessionLock | None = None
    loaded: LoadedSession | None = None
    reservation: Reservation | None = None


class JsonlSessionStore:
    """The ``session_persistence`` service of the ``persistence-jsonl`` plugin.

    Stores each session as ``<root>/<escaped id>/session.jsonl`` (see the plugin docs for the
    format and the guarantees).
    """

    def __init__(self, root: Path, batch_delay: float) -> None:
        self._layout = Layout(root)
        self._writer = BatchWriter(batch_delay)
        self._followed: dict[str, Journal] = {}
        self._reserved: dict[str, Reservation] = {}
        self._closed = False
        self._late: set[str] = set()

    @property
    def root(self) -> Path:
        """The folder holding one folder per session."""
        return self._layout.root

    @property
    def batch_delay(self) -> float:
        return self._writer.delay

    def path_of(self, session_id: str) -> Path:
        """The log file of ``session_id`` (whether or not it exists)."""
        return self._layout.log(session_id)

    # ------------------------------------------------------------------ the service

    async def exists(self, session_id: str) -> bool:
        """Whether something is stored under ``session_id`` (``load`` says what, if it is not a log).

        :raises SessionAccessError: the store cannot be looked into (permissions), naming the path.
        """
        return await anyio.to_thread.run_sync(self._exists_blocking, session_id)

    def _exists_blocking(self, session_id: str) -> bool:
        path = self._layout.log(session_id)
        with _accessing(session_id, path):
            try:
                os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                return False
        return True

    async def load(self, session_id: str) -> LoadedSession:
        """Read, check and repair the stored log of ``session_id``.

        A torn last line is cut off; a turn left open is closed with repair events appended to
        the file (and fsynced) before this returns. The session's lock stays held for the
        session that resumes the log (``ctx.sessions.prepare(id, meta=..., seed=events)``).

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: another process holds the session, or it is live here.
        :raises SessionCorruptError: the log is damaged before its last line (naming file and line;
            the file is not modified).
        :raises SessionFormatError: the log is in a format version this plugin does not read.
        :raises SessionAccessError: the log or the lock cannot be used (a directory in place of
            the file, permissions, an I/O error), naming the path.
        """
        self._check_open("load a session")
        path = self._layout.log(session_id)
        if session_id in self._followed:
            msg = (
                f"session {session_id!r} is in use by process {os.getpid()} (this process: it is live in "
                f"this harness); dispose it before loading it again"
            )
            raise SessionInUseError(msg, session_id=session_id, pid=os.getpid())
        earlier = self._reserved.pop(session_id, None)
        held = _Held(lock=earlier.lock if earlier is not None else None)
        try:
            await anyio.to_thread.run_sync(self._load_blocking, session_id, path, held)
        except BaseException:
            if held.lock is not None:
                held.lock.release()
            raise
        assert held.loaded is not None
        assert held.reservation is not None
        if self._closed or session_id in self._followed:  # the plugin stopped, or a race: do not keep it
            held.reservation.lock.release()
        else:
            self._reserved[session_id] = held.reservation
        return held.loaded

    async def read(self, session_id: str) -> LoadedSession:
        """The stored log of ``session_id`` as ``load`` would return it, for viewing only.

        Takes no lock and writes nothing: a torn last line is left out and the repair events of an
        open turn are computed in memory (``repaired``), never appended. Safe while another
        process has the session open.
        """
        self._writer.drain_all()
        path = self._layout.log(session_id)
        return await anyio.to_thread.run_sync(self._read_blocking, session_id, path)

    def _read_blocking(self, session_id: str, path: Path) -> LoadedSession:
        with _accessing(session_id, path):
            self._check_is_log(session_id, path)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise self._not_found(session_id, path) from None
        stored = parse_log(path, data)
        repaired = tuple(repair_events(stored.events, path))
        return LoadedSession(
            id=session_id,
            meta=stored.header.meta,
            events=stored.events + repaired,
            created=stored.header.created,
            path=path,
            repaired=repaired,
            truncated=stored.torn,
            checked=stored.checked,
        )

    def release(self, session_id: str) -> None:
        """Give up the reservation ``load`` kept, when the resume that was to follow failed.

        Idempotent; a session that is live here is not affected.
        """
        if session_id in self._followed:
            return
        reservation = self._reserved.pop(session_id, None)
        if reservation is not None:
            reservation.lock.release()

    def _load_blocking(self, session_id: str, path: Path, held: _Held) -> None:
        with _accessing(session_id, path):
            self._check_is_log(session_id, path)
            if held.lock is None:
                held.lock = SessionLock.acquire(path.parent / LOCK_NAME, session_id)
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # deleted before we locked
                raise self._not_found(session_id, path) from None
            self._recover_blocking(session_id, path, data, held)

    def _recover_blocking(self, session_id: str, path: Path, data: bytes, held: _Held) -> None:
        stored = parse_log(path, data)
        if stored.header.id != session_id:
            msg = (
                f"{path} holds session {stored.header.id!r}, not {session_id!r}: two ids that differ "
                f"only in case on a case-insensitive file system cannot both be stored"
            )
            raise SessionConflictError(msg, session_id=session_id, path=path)
        events = stored.events
        repaired = tuple(repair_events(events, path))
        size = stored.valid_size
        if stored.torn or repaired:
            tail = b"".join(encode_event(event) for event in repaired)
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                if stored.torn:
                    os.ftruncate(fd, stored.valid_size)  # only the torn tail: never a complete line
                view = memoryview(tail)
                offset = stored.valid_size
                while view:
                    written = os.pwrite(fd, view, offset)
                    offset += written
                    view = view[written:]
                sync_file(fd)
            finally:
                os.close(fd)
            size += len(tail)
            if stored.torn:
                logger.warning(
                    "session %r: dropped a torn last line (%d bytes) of %s", session_id, stored.torn, path
                )
            if repaired:
                logger.warning(
                    "session %r: the log ended inside a turn; closed it with %d repair events (%s)",
                    session_id,
                    len(repaired),
                    path,
                )
            events = events + repaired
        header = stored.header
        held.loaded = LoadedSession(
            id=session_id,
            meta=header.meta,
            events=events,
            created=header.created,
            path=path,
            repaired=repaired,
            truncated=stored.torn,
            checked=stored.checked,
        )
        assert held.lock is not None  # taken by _load_blocking before it read the file
        held.reservation = Reservation(held.lock, len(events), events[-1] if events else None, size)

    async def repair(self, session_id: str) -> RepairReport:
        """Cut the stored log of ``session_id`` before its first damaged line, keeping a backup.

        The explicit step after a ``SessionCorruptError``: the original file is copied (and
        fsynced) to ``session.jsonl.damaged-<UTC time>`` first, then the log is truncated at the
        first line ``load`` refuses; a sound log is left alone. Resume it afterwards as usual (a
        turn the cut leaves open is closed by crash repair then).

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: the session is live here or held by another process.
        :raises SessionCorruptError: the header is damaged: there is nothing to keep.
        :raises SessionAccessError: the files cannot be read or written, naming the path.
        """
        self._check_open("repair a session")
        if session_id in self._followed:
            msg = (
                f"session {session_id!r} is in use by process {os.getpid()} (this process: it is live in "
                f"this harness); dispose it before repairing it"
            )
            raise SessionInUseError(msg, session_id=session_id, pid=os.getpid())
        reserved = self._reserved.pop(session_id, None)
        held = _Held(lock=reserved.lock if reserved is not None else None)
        try:
            return await anyio.to_thread.run_sync(self._repair_blocking, session_id, held)
        finally:
            if held.lock is not None:
                held.lock.release()

    def _repair_blocking(self, session_id: str, held: _Held) -> RepairReport:
        path = self._layout.log(session_id)
        with _accessing(session_id, path):
            self._check_is_log(session_id, path)
            if held.lock is None:
                held.lock = SessionLock.acquire(path.parent / LOCK_NAME, session_id)
            report = cut_damaged(session_id, path)
        if report.backup is not None:
            logger.warning(
                "session %r: cut %s at line %s (%d lines dropped); the original is kept as %s",
                session_id,
                path,
                report.line,
                report.dropped_lines,
                report.backup,
            )
        return report

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every stored session, oldest first (by ``created``), each read from its header and a byte scan.

        A folder whose log cannot be read (damaged header, newer format) is skipped with a warning.
        """
        self._writer.drain_all()  # counts include what the live sessions published a moment ago
        return await anyio.to_thread.run_sync(self._list_blocking)

    def _list_blocking(self) -> tuple[SessionInfo, ...]:
        root = self._layout.root
        try:
            folders = [entry for entry in os.scandir(root) if entry.is_dir()]
        except FileNotFoundError:
            return ()
        infos = []
        for folder in folders:
            path = Path(folder.path) / LOG_NAME
            try:
                data = path.read_bytes()
                modified = path.stat().st_mtime
                summary = summarize_log(path, data)
            except FileNotFoundError:
                continue
            except (PersistenceError, OSError) as exc:
                logger.warning("skipping %s in the session listing: %s", path, exc)
                continue
            header = summary.header
            infos.append(
                SessionInfo(
                    id=header.id,
                    created=header.created,
                    modified=modified,
                    cwd=header.meta.cwd,
                    parent_id=header.meta.parent_id,
                    seed_length=header.meta.seed_length,
                    events=summary.events,
                    turns=summary.turns,
                    title=summary.title,
                    path=path,
                )
            )
        infos.sort(key=lambda info: (info.created, info.id))
        return tuple(infos)

    async def delete(self, session_id: str) -> None:
        """Remove the stored session (its folder and everything this plugin put in it).

        :raises SessionNotFoundError: nothing is stored under ``session_id``.
        :raises SessionInUseError: the session is live here or held by another process.
        """
        self._check_open("delete a session")
        if session_id in self._followed:
            msg = (
                f"session {session_id!r} is in use by process {os.getpid()} (this process: it is live in "
                f"this harness); dispose it before deleting it"
            )
            raise SessionInUseError(msg, session_id=session_id, pid=os.getpid())
        reserved = self._reserved.pop(session_id, None)
        held = _Held(lock=reserved.lock if reserved is not None else None)
        try:
            await anyio.to_thread.run_sync(self._delete_blocking, session_id, held)
        finally:
            if held.lock is not None:
                held.lock.release()

    def _delete_blocking(self, session_id: str, held: _Held) -> None:
        folder = self._layout.folder(session_id)
        path = folder / LOG_NAME
        with _accessing(session_id, path):
            self._delete_log_blocking(session_id, folder, path, held)

    def _delete_log_blocking(self, session_id: str, folder: Path, path: Path, held: _Held) -> None:
        if not path.is_file():
            raise self._not_found(session_id, path)
        if held.lock is None:
            held.lock = SessionLock.acquire(folder / LOCK_NAME, session_id)
        path.unlink(missing_ok=True)
        for stale in (*folder.glob(f"{TEMP_PREFIX}*"), *folder.glob(f"{BACKUP_PREFIX}*")):
            stale.unlink(missing_ok=True)
        # The lock file goes last, while we still hold it: a process that opened it meanwhile finds
        # it unlinked after its flock and starts over (see SessionLock.acquire).
        (folder / LOCK_NAME).unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError as exc:  # someone else's files in the folder: leave them be
            logger.warning("session %r deleted, but its folder %s stays: %s", session_id, folder, exc)
        fsync_dir(self._layout.root)

    def _check_is_log(self, session_id: str, path: Path) -> None:
        """``path`` is a regular file: else not found (nothing there) or an access error (something else)."""
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            if path.parent.exists() and not path.parent.is_dir():
                msg = (
                    f"session {session_id!r}: {path.parent} is a file, not a session folder; move it away "
                    f"or delete it"
                )
                raise SessionAccessError(msg, session_id=session_id, path=path.parent) from None
            raise self._not_found(session_id, path) from None
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            msg = (
                f"session {session_id!r}: {path} is {what}, not a session log; move it away or delete "
                f"the session folder {path.parent}"
            )
            raise SessionAccessError(msg, session_id=session_id, path=path)

    def _not_found(self, session_id: str, path: Path) -> SessionNotFoundError:
        msg = (
            f"no stored session {session_id!r} (looked for {path}); list them with session_persistence.list()"
        )
        return SessionNotFoundError(msg, session_id=session_id, path=path)

    def _check_open(self, what: str) -> None:
        if self._closed:
            msg = f"cannot {what}: the persistence-jsonl plugin has stopped"
            raise PersistenceError(msg)

    # ------------------------------------------------------------------ following live sessions

    async def follow(self, session: Session) -> None:
        """Start persisting ``session``: create or reopen its log, then write all it publishes.

        Never raises: a session that cannot be persisted (in use elsewhere, conflicting with the
        stored log, an I/O error) is logged now and fails each of its flushes with the reason.
        """
        if self._closed:
            return
        session_id = session.id
        taken = self._followed.get(session_id)
        if taken is not None:
            if taken.session is not session:
                logger.error("session %r: another live session with this id is already persisted", session_id)
            return
        journal = Journal(session, self._layout.log(session_id))
        self._followed[session_id] = journal  # from here on the listener buffers its events
        snapshot = session.events[:]
        reservation = self._reserved.pop(session_id, None)
        header = _header_for(session)
        async with journal.io:
            try:
                with anyio.CancelScope(shield=True):  # the thread finishes anyway; keep its result
                    opened = await anyio.to_thread.run_sync(
                        journal.open_blocking, snapshot, reservation, header
                    )
            except (PersistenceError, OSError) as exc:
                if reservation is not None:
                    reservation.lock.release()
                if isinstance(exc, PersistenceError):
                    journal.broken = exc
                else:
                    journal.broken = journal.error(f"cannot open the log: {exc}", cause=exc)
                journal.pending.clear()
                logger.error("session %r will not be persisted: %s", session_id, journal.broken)
                return
            journal.opened(opened, snapshot)
        if self._followed.get(session_id) is not journal:  # disposed while opening
            await journal.close()
        elif journal.durable_soon:  # an urgent event came while the file was opening
            journal.durable_soon = False
            self._writer.urgent(journal)
        elif journal.pending:
            self._writer.mark(journal)

    def problem_of(self, session: Session) -> PersistenceError | None:
        """Why ``session`` is not being persisted (in use, conflicting log, I/O), or ``None``."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return None
        broken = journal.broken
        return broken if isinstance(broken, PersistenceError) else None

    def publish(self, session: Session, event: SessionEvent) -> None:
        """The ``session/event`` listener: buffer the event and wake the writer. Must stay cheap.

        An urgent event (an inbox record, idle context) is written at once and its fsync started
        at once (SPEC §9.1), whatever ``batch_delay`` is.
        """
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            if self._closed and session.id not in self._late:
                self._late.add(session.id)
                logger.warning(
                    "session %r: events published after the persistence-jsonl plugin stopped are not stored",
                    session.id,
                )
            return
        if journal.broken is not None:
            return
        journal.pending.append(event)
        if is_urgent(session, event):
            self._writer.urgent(journal)
        elif not journal.dirty:
            self._writer.mark(journal)

    async def flush(self, session: Session) -> None:
        """The ``session/flush`` listener: everything published so far is on disk and fsynced.

        :raises SessionWriteError: naming the session and its file, when it is not.
        :raises PersistenceError: the session could not be persisted at all (in use, conflict).
        """
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return
        await journal.sync()

    async def unfollow(self, session: Session) -> None:
        """The ``session/disposed`` listener: write, fsync and close the log; release the lock."""
        journal = self._followed.get(session.id)
        if journal is None or journal.session is not session:
            return
        del self._followed[session.id]
        await journal.close()

    async def run_writer(self) -> None:
        """The background writer task (one per plugin)."""
        await self._writer.run()

    async def close(self) -> None:
        """The plugin stops: write and fsync every followed log, close them, release every lock."""
        self._closed = True
        journals = list(self._followed.values())
        self._followed.clear()
        for journal in journals:
            await journal.close()
        reservations = list(self._reserved.values())
        self._reserved.clear()
        for reservation in reservations:
            reservation.lock.release()

    def __repr__(self) -> str:
        return f"<JsonlSessionStore {str(self.root)!r} following={len(self._followed)}>"


@contextmanager
def _accessing(session_id: str, path: Path) -> Iterator[None]:
    """OS errors on a stored session's files, as ``SessionAccessError`` naming the file concerned."""
    try:
        yield
    except PersistenceError:
        raise
    except OSError as exc:
        where = Path(exc.filename) if isinstance(exc.filename, str) else path
        name = errno.errorcode.get(exc.errno or 0, "")
        reason = f"{exc.strerror or exc} ({name})" if name else (exc.strerror or str(exc))
        msg = f"session {session_id!r}: cannot use {where}: {reason}"
        raise SessionAccessError(msg, session_id=session_id, path=where) from exc


def _header_for(session: Session) -> Header:
    return Header(id=session.id, created=time.time(), meta=session.meta)
