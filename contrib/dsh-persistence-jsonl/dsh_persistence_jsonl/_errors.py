"""The errors of the JSONL store: one small tree under ``DshError``.

PersistenceError(DshError)
  + SessionNotFoundError(PersistenceError, LookupError)    .session_id, .path
  + SessionInUseError(PersistenceError, RuntimeError)      .session_id, .pid
  + SessionConflictError(PersistenceError, RuntimeError)   .session_id, .path
  + SessionCorruptError(PersistenceError, ValueError)      .path, .line, .event_type, .field
  + SessionFormatError(PersistenceError, ValueError)       .path, .version
  + SessionWriteError(PersistenceError, OSError)           .session_id, .path
  + SessionAccessError(PersistenceError, OSError)          .session_id, .path
"""

from __future__ import annotations

from pathlib import Path

from dsh_core import DshError

__all__ = [
    "PersistenceError",
    "SessionAccessError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionNotFoundError",
    "SessionWriteError",
]


class PersistenceError(DshError):
    """Base of every error the JSONL session store raises on purpose."""


class SessionNotFoundError(PersistenceError, LookupError):
    """No stored log exists for the session id."""

    def __init__(self, message: str, *, session_id: str, path: Path) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.path = path

    def __str__(self) -> str:  # LookupError would print the repr of the message
        return str(self.args[0])


class SessionInUseError(PersistenceError, RuntimeError):
    """Another process (or another harness in this one) holds the session's lock.

    ``pid`` is the holder's process id as it wrote it into the lock file, or ``None`` when it has
    not written it yet.
    """

    def __init__(self, message: str, *, session_id: str, pid: int | None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.pid = pid


class SessionConflictError(PersistenceError, RuntimeError):
    """A live session does not continue the log already stored under its id (a fresh session
    created with the id of a stored one, instead of resuming it)."""

    def __init__(self, message: str, *, session_id: str, path: Path) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.path = path


class SessionCorruptError(PersistenceError, ValueError):
    """A complete line of a stored log is damaged; ``line`` is 1-based (the header is line 1).

    For an event line that is well-formed JSON but breaks its type's data rules, ``event_type``
    and ``field`` (``data.turn``, ``data.message.id``...) say which rule; otherwise they are
    ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path,
        line: int,
        event_type: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.event_type = event_type
        self.field = field

    @property
    def seq(self) -> int | None:
        """The seq of the damaged event (``line - 2``), or ``None`` for the header."""
        return self.line - 2 if self.line >= 2 else None


class SessionFormatError(PersistenceError, ValueError):
    """A stored log was written in a format version this plugin does not read."""

    def __init__(self, message: str, *, path: Path, version: object) -> None:
        super().__init__(message)
        self.path = path
        self.version = version


class SessionWriteError(PersistenceError, OSError):
    """Writing or syncing a session's log failed; the ``OSError`` is chained as ``__cause__``."""

    def __init__(self, message: str, *, session_id: str, path: Path) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.path = path

    def __str__(self) -> str:  # OSError would print its args tuple
        return str(self.args[0])


class SessionAccessError(PersistenceError, OSError):
    """A stored session's file or folder cannot be used: unreadable, not a file, not a folder.

    ``path`` is the file or folder concerned; the ``OSError``, when there was one, is chained as
    ``__cause__``.
    """

    def __init__(self, message: str, *, session_id: str, path: Path) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.path = path

    def __str__(self) -> str:  # OSError would print its args tuple
        return str(self.args[0])
