"""One owner per session across processes: a byte-range lock per session, held while the session is ours.

SQLite locks the whole database, not a row, so ownership is a lock of its own: an open-file-description
lock (Linux ``F_OFD_SETLK``) on one byte of ``<database>-owners``, an empty file beside the
database, at an offset hashed from the session id (62 bits, so two ids meet only by a negligible
chance; the worst case is a false "in use"). The kernel drops such a lock when the holder's file
closes, however it ends (a SIGKILL included), so a dead holder frees its sessions at once with no
manual step. An OFD lock belongs to the open file, not the process: two stores of one process (two
harnesses) exclude each other like two processes. The file is opened close-on-exec, so tool
subprocesses never inherit a lock.

Why not lock bytes of the database file itself: a process that closes any descriptor of a file loses
all its POSIX locks on it, SQLite's own included, and SQLite would then corrupt the database. The
``-owners`` file is never opened by SQLite.

Every call here is one non-blocking syscall: it runs on the event loop.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
from pathlib import Path
from typing import Final

__all__ = ["Owners", "lock_offset"]

#: ``struct flock``: l_type, l_whence, (pad), l_start, l_len, l_pid, (pad): 32 bytes on 64-bit Linux
_FLOCK: Final = struct.Struct("=hh4xqqi4x")
_SETLK: Final[int | None] = getattr(fcntl, "F_OFD_SETLK", None)


def lock_offset(session_id: str) -> int:
    """The byte of the owners file that stands for ``session_id`` (1 .. 2**62)."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return 1 + (int.from_bytes(digest, "big") >> 2)


class Owners:
    """The session locks of one store: taken and given back on one open file of ``<database>-owners``."""

    def __init__(self, database: Path) -> None:
        if _SETLK is None:
            msg = (
                "persistence-sqlite needs open-file-description locks (F_OFD_SETLK, Linux 3.15+) to keep one "
                "owner per session; use persistence-jsonl on this system"
            )
            raise OSError(errno.ENOSYS, msg)
        self._setlk: int = _SETLK
        self.path = database.with_name(database.name + "-owners")
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._held: set[str] = set()

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    def try_acquire(self, session_id: str) -> bool:
        """Own ``session_id`` if nobody does; whether we do now (also when we already did)."""
        if session_id in self._held:
            return True
        fd = self._open_fd()
        try:
            fcntl.fcntl(fd, self._setlk, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, lock_offset(session_id), 1, 0))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        self._held.add(session_id)
        return True

    def release(self, session_id: str) -> None:
        """Give ``session_id`` back (idempotent; never raises)."""
        if session_id not in self._held or self._fd is None:
            return
        self._held.discard(session_id)
        try:
            fcntl.fcntl(self._fd, self._setlk, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, lock_offset(session_id), 1, 0))
        except OSError:
            pass

    def close(self) -> None:
        """Give every session back: closing the file drops its locks."""
        fd, self._fd = self._fd, None
        self._held.clear()
        if fd is not None:
            os.close(fd)

    def _open_fd(self) -> int:
        if self._fd is None:
            msg = "the session store has stopped"
            raise OSError(errno.EBADF, msg)
        return self._fd
