"""The advisory lock that keeps two processes from writing one session: ``flock`` on ``<folder>/lock``.

The holder writes its pid into the lock file, so the one refused can say who holds it. ``flock``
locks belong to the open file, so the kernel drops them when the holder dies, however it dies
(a SIGKILL included), and a second ``open`` in the same process is refused like another process.
The descriptor is close-on-exec: tool subprocesses never inherit the lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from ._errors import SessionAccessError, SessionInUseError

__all__ = ["SessionLock"]

#: how often to retry when the lock file is replaced between ``open`` and ``flock`` (a delete)
_ATTEMPTS = 5


class SessionLock:
    """An exclusive lock on one session folder; made by ``acquire``, ended by ``release``."""

    __slots__ = ("_fd", "path", "session_id")

    def __init__(self, fd: int, path: Path, session_id: str) -> None:
        self._fd: int | None = fd
        self.path = path
        self.session_id = session_id

    @classmethod
    def acquire(cls, path: Path, session_id: str) -> SessionLock:
        """Take the lock at ``path`` (created if missing) without waiting.

        Blocking I/O: call it from a worker thread when it matters.

        :raises SessionInUseError: another holder has it, naming its pid.
        :raises SessionAccessError: the lock file cannot be opened or locked (a directory in its
            place, permissions, a missing folder), naming its path.
        """
        for _ in range(_ATTEMPTS):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise _unusable(session_id, path, exc) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise _unusable(session_id, path, exc) from exc
                pid = _read_pid(fd)
                os.close(fd)
                raise _in_use(session_id, pid, path) from None
            if _same_file(fd, path):
                try:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                except OSError as exc:
                    os.close(fd)
                    raise _unusable(session_id, path, exc) from exc
                return cls(fd, path, session_id)
            # The file was unlinked (the session deleted) between our open and flock: try again.
            os.close(fd)
        msg = f"session {session_id!r}: could not take the lock {path}: it keeps being replaced"
        raise SessionInUseError(msg, session_id=session_id, pid=None)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock. Idempotent; never raises."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.close(fd)  # closing the last descriptor of the open file drops the flock
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"<SessionLock {str(self.path)!r}{'' if self.held else ' released'}>"


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def _in_use(session_id: str, pid: int | None, path: Path) -> SessionInUseError:
    if pid is None:
        holder = "another process"
    elif pid == os.getpid():
        holder = f"process {pid} (this process: another harness, or a load() not yet resumed)"
    else:
        holder = f"process {pid}"
    msg = (
        f"session {session_id!r} is in use by {holder} (lock {path}); stop that process or dispose "
        f"the session there, then try again"
    )
    return SessionInUseError(msg, session_id=session_id, pid=pid)


def _unusable(session_id: str, path: Path, exc: OSError) -> SessionAccessError:
    what = (
        "a directory stands where the lock file should be"
        if isinstance(exc, IsADirectoryError)
        else (exc.strerror or str(exc))
    )
    msg = (
        f"session {session_id!r}: cannot take the lock {path}: {what}; the session folder must hold a "
        f"lock file this process can open for writing"
    )
    return SessionAccessError(msg, session_id=session_id, path=path)
