"""The one set of errors every persistence backend raises, so a caller catches "not found" or "in use"
without knowing which backend is loaded.

PersistenceError(DshError)                                  .session_id
  + SessionNotFoundError(PersistenceError, LookupError)
  + SessionInUseError(PersistenceError, RuntimeError)       .host, .pid
    - SessionFencedError(SessionInUseError)                 .epoch (ours, now stale)
  + SessionConflictError(PersistenceError, RuntimeError)    .path
  + SessionCorruptError(PersistenceError, ValueError)       .seq, .event_type, .field, .path, .line
  + SessionFormatError(PersistenceError, ValueError)        .version, .expected, .path
  + SessionWriteError(PersistenceError, OSError)            .path
  + SessionAccessError(PersistenceError, OSError)           .path
  + StoreUnavailableError(PersistenceError, ConnectionError) .target (a server, never its password)

Every attribute but the message is keyword-only and optional: each backend fills what it knows
(a file backend its ``path`` and ``line``, a database its ``seq``). ``str(error)`` is the message.
"""

from __future__ import annotations

from pathlib import Path

from dsh_core.vocabulary._errors import DshError

__all__ = [
    "PersistenceError",
    "SessionAccessError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFencedError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionNotFoundError",
    "SessionWriteError",
    "StoreUnavailableError",
]


class PersistenceError(DshError):
    """Base of every error a session store raises on purpose; ``session_id`` when one is concerned."""

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __str__(self) -> str:  # LookupError would print the repr of the message, OSError its args
        return str(self.args[0]) if self.args else ""


class SessionNotFoundError(PersistenceError, LookupError):
    """Nothing is stored under the session id. ``path``: where a file backend looked."""

    def __init__(self, message: str, *, session_id: str | None = None, path: Path | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.path = path


class SessionInUseError(PersistenceError, RuntimeError):
    """Another owner holds the session: another process, host, or another harness in this one.

    ``host`` and ``pid`` name the holder as it recorded itself (``None`` when not known).
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        super().__init__(message, session_id=session_id)
        self.host = host
        self.pid = pid


class SessionFencedError(SessionInUseError):
    """This process lost the session: another owner took it over (a newer epoch), so nothing more is
    written; every later flush raises this again. ``epoch`` is the one this process held."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        host: str | None = None,
        pid: int | None = None,
        epoch: int = 0,
    ) -> None:
        super().__init__(message, session_id=session_id, host=host, pid=pid)
        self.epoch = epoch


class SessionConflictError(PersistenceError, RuntimeError):
    """A live session does not continue the log stored under its id (a fresh session created with the
    id of a stored one, instead of resuming it)."""

    def __init__(self, message: str, *, session_id: str | None = None, path: Path | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.path = path


class SessionCorruptError(PersistenceError, ValueError):
    """A stored log cannot be read as a log: a gap, an event that is not one, an event that breaks the
    rules of its type (the checks ``session.append`` makes).

    ``seq`` is the damaged event's (``None``: the session's own record, a header); for an event that
    breaks its type's data rules, ``event_type`` and ``field`` (``data.turn``...) say which rule.
    A line-oriented backend also names the ``path`` and the 1-based ``line``.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        seq: int | None = None,
        event_type: str | None = None,
        field: str | None = None,
        path: Path | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message, session_id=session_id)
        self.seq = seq
        self.event_type = event_type
        self.field = field
        self.path = path
        self.line = line


class SessionFormatError(PersistenceError, ValueError):
    """The store was written in a format (schema) version this backend does not read."""

    def __init__(
        self,
        message: str,
        *,
        version: object = None,
        expected: int | None = None,
        path: Path | None = None,
        session_id: str | None = None,
    ) -> None:
        super().__init__(message, session_id=session_id)
        self.version = version
        self.expected = expected
        self.path = path


class SessionWriteError(PersistenceError, OSError):
    """Writing or syncing a session's events failed; the cause is chained as ``__cause__``."""

    def __init__(self, message: str, *, session_id: str | None = None, path: Path | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.path = path


class SessionAccessError(PersistenceError, OSError):
    """A stored session cannot be used: unreadable, not a file, not a folder; ``path`` is the one concerned."""

    def __init__(self, message: str, *, session_id: str | None = None, path: Path | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.path = path


class StoreUnavailableError(PersistenceError, ConnectionError):
    """The store cannot be reached or refused us (a server down, a database file that cannot be opened).

    ``target`` names it as messages do (``user@host:port/dbname``, a file path; never a password).
    """

    def __init__(self, message: str, *, target: str = "", session_id: str | None = None) -> None:
        super().__init__(message, session_id=session_id)
        self.target = target
